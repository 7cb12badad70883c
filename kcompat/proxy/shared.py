"""What every connection of one proxy shares: its settings, hooks and open connections."""

from __future__ import annotations

import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kcompat.proxy.client_report import ClientReport
from kcompat.proxy.hooks import ConnectHook, Exchange, RequestHook, ResponseHook
from kcompat.proxy.log_limit import LogLimit
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.sasl import UpstreamLogin
from kcompat.proxy.sni import SniPattern
from kcompat.proxy.tenant import Tenant
from kcompat.proxy.upstream import UpstreamSide
from kcompat.security.sasl_exchange import SaslExchange


class Connection(Protocol):
    """A client connection (connection.ClientConnection), as the proxy's shutdown sees it."""

    def close(self) -> None: ...


@dataclass
class Shared:
    """What every connection of one proxy shares."""

    nodes: NodeMap
    upstreams: list[tuple[str, int]]
    max_request: int
    buffer_bytes: int
    connect_timeout: float
    request_hook: RequestHook | None = None
    response_hook: ResponseHook | None = None
    connect_hook: ConnectHook | None = None
    # with hooks: whether they would pass this exchange (None: a request not yet read) untouched
    hooks_idle: Callable[[Exchange | None], bool] | None = None
    tenant: Tenant | None = None  # a virtual cluster: its names prefixed upstream (tenant.py)
    sni: SniPattern | None = None  # SNI routing: the node is the one the TLS server name names
    upstream_tls: ssl.SSLContext | None = None
    report: ClientReport | None = None  # the compatibility report (client_report.py)
    upstream_apis: dict[int, tuple[int, int]] = field(default_factory=dict)  # its ApiVersions
    client_sasl: Callable[[], SaslExchange] | None = None  # SASL terminated here (sasl.py)
    upstream_login: Callable[[], UpstreamLogin] | None = None  # the proxy's own SASL upstream
    sasl_counts: Counter[str] = field(default_factory=Counter)  # upstream logins, re-authentications
    logs: LogLimit = field(default_factory=LogLimit)
    connections: set[Connection] = field(default_factory=set)
    upstream_sides: set[UpstreamSide] = field(default_factory=set)  # open upstream connections
    next_id: int = 0
