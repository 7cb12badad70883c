"""`kcompat proxy`: run a ProxyServer on uvloop (asyncio's loop when uvloop is missing) until
SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.admin import proxy_admin
from kcompat.proxy.server import ProxyServer

log = logging.getLogger("kcompat.proxy")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed; using asyncio's event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop


async def _run(config: ProxyConfig) -> int:
    admin = proxy_admin(config)
    if admin is None:
        proxy = ProxyServer(config)  # no hooks: nothing decoded, nothing looked up per request
    else:
        hooks = admin.intercept
        proxy = ProxyServer(
            config, request_hook=hooks.request, response_hook=hooks.response, connect_hook=hooks.connect
        )
    try:
        await proxy.start()
    except OSError as e:
        log.error("cannot listen on %s: %s", config.get("proxy.bootstrap.listener"), e.strerror or e)
        return 1
    if admin is not None:
        try:
            await admin.start()
        except OSError as e:
            log.error("cannot listen on proxy.admin.listener %s: %s", admin.address, e.strerror or e)
            await proxy.close()
            return 1
        log.info("kcompat proxy's fault rules and captures: %s/faults, %s/captures", admin.url, admin.url)
    host, base = config.advertised_host, config.get("proxy.node.port.base")
    log.info(
        "kcompat proxy serving bootstrap %s:%d for upstream %s; node n on %s:%d+n (nodes now: %s)",
        proxy.bind_host,
        proxy.bootstrap_port,
        ",".join(config.get("proxy.upstream.bootstrap.servers")),
        host,
        base,
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
    await proxy.close()
    return 0


def serve(config: ProxyConfig) -> int:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_run(config))
