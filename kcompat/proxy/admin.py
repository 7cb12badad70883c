"""`proxy.admin.listener`: the proxy's HTTP API for fault rules and traffic captures, the same
/faults and /captures routes and JSON as `kcompat serve`'s admin listener (kcompat/admin_http),
over the engines the proxy's hooks consult (intercept.py), and the compatibility report
(client_report.py): GET /proxy/clients as JSON and GET /metrics in Prometheus' text format.

    admin = proxy_admin(config)        # None without proxy.admin.listener: the proxy has no hooks
    ProxyServer(config, request_hook=admin.intercept.request, response_hook=admin.intercept.response,
                connect_hook=admin.intercept.connect, report=admin.report)
    await admin.start(); admin.url; await admin.close()
"""

from __future__ import annotations

import json
from pathlib import Path

from kcompat.admin_http.captures import captures_route
from kcompat.admin_http.faults import faults_route
from kcompat.admin_http.http_server import AdminServer, Page
from kcompat.capture import CaptureEngine
from kcompat.config.proxy_config import ProxyConfig, split_host_port
from kcompat.faults import FaultEngine
from kcompat.proxy.client_report import ClientReport
from kcompat.proxy.intercept import Intercept
from kcompat.proxy.server import listening_socket


class ProxyAdmin:
    def __init__(self, intercept: Intercept, address: str) -> None:
        self.intercept = intercept
        self.address = address
        self.report = ClientReport()
        self.server = AdminServer(
            {"/metrics": self._metrics, "/proxy/clients": self._clients},
            api={"/faults": faults_route(intercept.faults), "/captures": captures_route(intercept.captures)},
        )
        self.url = ""

    async def start(self) -> None:
        """Listen on the address (port 0: any free port); OSError as bind raises it."""
        sock = listening_socket(*split_host_port(self.address))
        bound_host, bound_port = sock.getsockname()[:2]
        self.url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"
        await self.server.start(sock)

    async def close(self) -> None:
        await self.server.close()

    def _metrics(self, query: dict[str, list[str]]) -> Page:
        return Page(self.report.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _clients(self, query: dict[str, list[str]]) -> Page:
        body = json.dumps({"clients": self.report.clients()}, indent=2)
        return Page(body.encode(), "application/json")


def proxy_admin(config: ProxyConfig) -> ProxyAdmin | None:
    address = config.get("proxy.admin.listener")
    if not address:
        return None
    capture_dir = config.get("proxy.capture.dir")
    intercept = Intercept(FaultEngine(), CaptureEngine(Path(capture_dir) if capture_dir else None))
    return ProxyAdmin(intercept, str(address))
