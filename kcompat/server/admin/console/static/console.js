// The group page's lag chart: uPlot over /group/lag.json, redrawn every sample interval.
(function () {
  // The y axis as wide as its widest tick label: uPlot's fixed 50 px let a six-digit lag's ticks
  // run under the axis label.
  function fitTicks(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1 && axis._size) return axis._size; // uPlot asks again while it settles
    var widest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { widest = Math.max(widest, u.ctx.measureText(v).width); });
    return Math.ceil(axis.ticks.size + axis.gap + widest / (window.devicePixelRatio || 1)) + 4;
  }
  function start() {
    var el = document.getElementById("lag-chart");
    if (!el || typeof uPlot === "undefined") return;
    var url = "/group/lag.json?id=" + encodeURIComponent(el.dataset.group);
    var every = Math.max(1, parseFloat(el.dataset.every || "2")) * 1000;
    var chart = null;
    function draw(data) {
      if (chart === null) {
        chart = new uPlot({
          width: Math.min(900, window.innerWidth - 80), height: 280,
          series: [{}, { label: "total lag (records)", stroke: "#2f6fde", width: 2, fill: "rgba(47,111,222,.1)" }],
          axes: [{}, { label: "lag", size: fitTicks }],
          scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
        }, data, el);
        el.chart = chart; // for tests and the browser's console
        el.dataset.drawn = "true";
      } else {
        chart.setData(data);
      }
      el.dataset.points = String(data[0].length);
      el.dataset.last = data[1].length ? String(data[1][data[1].length - 1]) : "";
    }
    function poll() {
      fetch(url).then(function (r) { return r.json(); }).then(draw).catch(function () {});
    }
    poll();
    setInterval(poll, every);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
