"""Shared teardown of the proxy streaming tests: one client, a proxy and a fake upstream, each closed."""

from __future__ import annotations

import asyncio

from kcompat.proxy.shared import Shared


async def close_rig(
    writer: asyncio.StreamWriter, shared: Shared, proxy: asyncio.Server, upstream: asyncio.Server
) -> None:
    """Close the client, every proxy connection and both servers, then let their tasks end."""
    writer.close()
    for connection in list(shared.connections):
        connection.close()
    proxy.close()
    upstream.close()
    await proxy.wait_closed()
    await upstream.wait_closed()
    await asyncio.sleep(0.05)
