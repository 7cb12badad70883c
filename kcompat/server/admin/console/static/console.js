// The group page's lag chart: uPlot over /group/lag.json, redrawn every sample interval.
(function () {
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
          axes: [{}, { label: "lag" }],
          scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
        }, data, el);
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
