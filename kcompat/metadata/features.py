"""Feature levels: what kcompat supports, what is finalized, and why a registration is refused.

Kafka's names (server-common Feature, FinalizedFeatures; the controller's ClusterControlManager):
* a broker claims a [min, max] range per feature in BrokerRegistration; the controller refuses it
  (UNSUPPORTED_VERSION, with no message on the wire) when a finalized level is outside a range it
  claims, or when a feature it does not name is finalized above 0 (taken as range 0-0);
  metadata.version counts as level 1 when not finalized, every other feature as 0;
* ApiVersions lists the finalized levels above 0 at the finalized features epoch (in KRaft, the
  metadata image's offset) and, for v0-3, leaves out supported features whose minimum is 0
  (KAFKA-17011: older clients fail to read a 0 minimum).

Claiming a level means doing what it asks: metadata.version 7-30 (3.3-IV3 to 4.3-IV0, every record
version the image decodes), group.version 1 (KIP-848), transaction.version 2 (KIP-890 part 2),
share.version 1 (KIP-932 share groups), eligible.leader.replicas.version 1 (KIP-966: the image keeps
the ELR and no ELR member counts as ISR), streams.version 1 (KIP-1071 streams groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
ELR_VERSION = "eligible.leader.replicas.version"

# What a cluster-mode broker claims in BrokerRegistration (and lists in ApiVersions).
CLUSTER_SUPPORTED: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        METADATA_VERSION: (7, 30),
        KRAFT_VERSION: (0, 1),
        GROUP_VERSION: (0, 1),
        TRANSACTION_VERSION: (0, 2),
        ELR_VERSION: (0, 1),
        SHARE_VERSION: (0, 1),
        STREAMS_VERSION: (0, 1),
    }
)

# A single node has no KRaft log or quorum, so no metadata.version or kraft.version to report.
SINGLE_NODE_SUPPORTED: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        GROUP_VERSION: (0, 1),
        TRANSACTION_VERSION: (0, 2),
        ELR_VERSION: (0, 1),
        SHARE_VERSION: (0, 1),
        STREAMS_VERSION: (0, 1),
    }
)


@dataclass(frozen=True)
class Features:
    """What ApiVersions reports: the supported ranges, the finalized levels and their epoch."""

    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    epoch: int = 0

    def supported_for(self, api_version: int) -> dict[str, tuple[int, int]]:
        """The supported ranges a client of `api_version` may read (KAFKA-17011)."""
        if api_version >= 4:
            return dict(self.supported)
        return {name: r for name, r in self.supported.items() if r[0] != 0}

    def finalized_levels(self) -> dict[str, int]:
        """The finalized levels above 0, as Kafka lists them."""
        return {name: level for name, level in self.finalized.items() if level != 0}


@dataclass(frozen=True)
class Refusal:
    """One finalized level outside the range this broker claims."""

    name: str
    finalized: int
    supported: tuple[int, int]

    def line(self) -> str:
        lo, hi = self.supported
        fix = f"format with --feature {self.name}={hi}" + (
            ""
            if self.name == METADATA_VERSION
            else f" or run kafka-features.sh downgrade --feature {self.name}={hi}"
        )
        return (
            f"the controllers finalized {self.name}={self.finalized}; this kcompat supports {lo}-{hi}; {fix}"
        )


def refusals(finalized: Mapping[str, int], supported: Mapping[str, tuple[int, int]]) -> list[Refusal]:
    """Every finalized level the controller would refuse this broker's registration for."""
    out = []
    for name, (lo, hi) in supported.items():
        level = finalized.get(name, 1 if name == METADATA_VERSION else 0)
        if not lo <= level <= hi:
            out.append(Refusal(name, level, (lo, hi)))
    for name, level in finalized.items():
        if name not in supported and level != 0:
            out.append(Refusal(name, level, (0, 0)))
    return out
