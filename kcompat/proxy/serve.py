"""`kcompat proxy`: run a ProxyServer on uvloop (asyncio's loop when uvloop is missing) until
SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from kcompat.config.errors import ConfigError
from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.admin import ProxyAdmin, proxy_admin
from kcompat.proxy.server import ProxyServer
from kcompat.proxy.tenant import Tenant

log = logging.getLogger("kcompat.proxy")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed; using asyncio's event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _servers(config: ProxyConfig, admin: ProxyAdmin | None) -> list[ProxyServer]:
    """One ProxyServer, or one per virtual cluster (each its own listeners and tenant prefix)."""
    hooks: dict[str, Any] = {}
    if admin is not None:  # without: no hooks, nothing decoded, nothing looked up per request
        i = admin.intercept
        hooks = {
            "request_hook": i.request,
            "response_hook": i.response,
            "connect_hook": i.connect,
            "report": admin.report,
        }
    if not config.virtual_clusters:
        servers = [ProxyServer(config, **hooks)]
    else:
        servers = [
            ProxyServer(config.for_virtual_cluster(vc), tenant=Tenant(vc.name, vc.prefix), **hooks)
            for vc in config.virtual_clusters
        ]
    for server in servers:  # no rule armed, no capture on: large frames stream past the hooks
        server.shared.hooks_idle = admin.intercept.idle if admin is not None else None
    return servers


async def _run(config: ProxyConfig) -> int:
    admin = proxy_admin(config)
    proxies = _servers(config, admin)
    started: list[ProxyServer] = []
    for proxy in proxies:
        try:
            await proxy.start()
        except OSError as e:
            log.error("cannot listen on %s:%d: %s", proxy.bind_host, proxy.bootstrap_port, e.strerror or e)
            for up in started:
                await up.close()
            return 1
        started.append(proxy)
    if admin is not None:
        try:
            await admin.start()
        except OSError as e:
            log.error("cannot listen on proxy.admin.listener %s: %s", admin.address, e.strerror or e)
            for proxy in proxies:
                await proxy.close()
            return 1
        log.info("kcompat proxy's fault rules and captures: %s/faults, %s/captures", admin.url, admin.url)
    for proxy in proxies:
        tenant = proxy.shared.tenant
        log.info(
            "kcompat proxy serving %sbootstrap %s:%d for upstream %s; node n on %s:%d+n (nodes now: %s)",
            "" if tenant is None else f"virtual cluster {tenant.name} (upstream names {tenant.prefix}*) on ",
            proxy.bind_host,
            proxy.bootstrap_port,
            ",".join(config.get("proxy.upstream.bootstrap.servers")),
            proxy.config.advertised_host,
            proxy.config.get("proxy.node.port.base"),
            ", ".join(f"{n}->{p}" for n, p in sorted(proxy.node_ports.items())) or "none yet",
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("kcompat proxy stopping")
    if admin is not None:
        await admin.close()
    for proxy in proxies:
        await proxy.close()
    return 0


def serve(config: ProxyConfig) -> int:
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_run(config))
    except ConfigError as e:  # settings only the listeners' set-up reads (TLS files, SASL users)
        print(f"kcompat: invalid configuration: {e}", file=sys.stderr)
        return 1
