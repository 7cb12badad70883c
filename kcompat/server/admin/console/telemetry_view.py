"""The console's client telemetry page (/clients): each client instance that asked for a
subscription or pushed metrics (KIP-714), and the last values it pushed."""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.telemetry.client_metrics import ClientMetricsManager

SHOWN_SERIES = 200  # per client on the page (/metrics has them all)


@dataclass(frozen=True, slots=True)
class ClientRow:
    instance_id: str
    client_id: str
    software: str
    address: str
    metrics: str  # the prefixes it is subscribed to ("none": the empty subscription)
    interval_ms: int
    pushes: int
    last_push_ms: int  # -1 before its first push
    series: list[tuple[str, str, str]]  # (metric, attributes, value)
    more: int  # series not shown


def clients(manager: ClientMetricsManager, now_ms: int) -> list[ClientRow]:
    rows = []
    for inst in sorted(
        manager.live(now_ms), key=lambda i: (str(i.attributes.get("client_id")), str(i.instance_id))
    ):
        a = inst.attributes
        series = sorted(inst.series.items())
        rows.append(
            ClientRow(
                instance_id=str(inst.instance_id),
                client_id=str(a.get("client_id") or ""),
                software=" ".join(
                    str(a.get(k) or "") for k in ("client_software_name", "client_software_version")
                ).strip(),
                address=f"{a.get('client_source_address') or ''}:{a.get('client_source_port') or ''}",
                metrics=", ".join(inst.metrics) or "none",
                interval_ms=inst.interval_ms,
                pushes=inst.pushes,
                last_push_ms=inst.last_push_ms if inst.pushes else -1,
                series=[
                    (name, ",".join(f"{k}={v}" for k, v in attrs), f"{s.value:g}")
                    for (name, attrs), s in series[:SHOWN_SERIES]
                ],
                more=max(len(series) - SHOWN_SERIES, 0),
            )
        )
    return rows
