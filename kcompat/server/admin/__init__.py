"""The HTTP admin listener: Prometheus /metrics and the web console. It only reads broker state,
through `ReadModel` views, never a private attribute."""
