"""Client quota entities and their values, as Kafka's ClientQuotaControlManager validates them,
ClientQuotasImage describes them and DefaultQuotaCallback picks the one that applies.

An entity is a sorted tuple of (type, name) pairs; a None name is the type's default
(`--entity-default`). Entity types: user, client-id (alone or together) and ip.

    precedence for a client (user U, client id C), the first set wins (ClientQuotaManager):
      1 user=U,client-id=C   2 user=U,client-id=<default>   3 user=U
      4 user=<default>,client-id=C   5 user=<default>,client-id=<default>   6 user=<default>
      7 client-id=C   8 client-id=<default>
    The entity that wins also names the sensor its clients share: a quota on user U is shared by
    all of U's client ids, one on <default> user by each user separately (quotaMetricTags).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "IP",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "USER",
    "DescribeFilter",
    "Entity",
    "QuotaError",
    "QuotaTable",
    "entity_of",
    "resolve",
    "validate_alteration",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> integral (LONG/INT) or not (DOUBLE)
_USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
_IP_KEYS = {CONNECTION_CREATION_RATE: True}
_LONG_MAX = float(2**63 - 1)
_INT_MAX = float(2**31 - 1)

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
QuotaTable = Mapping[Entity, Mapping[str, float]]


class QuotaError(Exception):
    """Kafka refuses the entity or the filter: `code` is the ErrorCode name (INVALID_REQUEST ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def _show(entity: Entity) -> str:
    return "(" + ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity) + ")"


def validate_alteration(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> tuple[Entity, dict[str, float | None]]:
    """The entity and its changes (None: remove), or QuotaError as ClientQuotaControlManager."""
    if not pairs:
        raise QuotaError("INVALID_REQUEST", "Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for etype, name in pairs:
        if etype in seen:
            raise QuotaError(
                "INVALID_REQUEST", f"Invalid client quota entity, duplicate entity entry {etype}"
            )
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError("INVALID_REQUEST", f"Unhandled client quota entity type: {etype}")
        seen[etype] = name
    entity = entity_of(seen.items())
    if IP in seen:
        if len(seen) > 1:
            raise QuotaError(
                "INVALID_REQUEST",
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            )
        keys = _IP_KEYS
    else:
        keys = _USER_CLIENT_KEYS
    changes: dict[str, float | None] = {}
    for key, value in ops:
        if key in changes:
            raise QuotaError(
                "INVALID_REQUEST",
                f"Duplicate quota key {key} not updating quota for this entity {_show(entity)}",
            )
        changes[key] = value
    for key, value in changes.items():
        if value is not None:
            _check_value(keys, key, value)
    return entity, changes


def _check_value(keys: Mapping[str, bool], key: str, value: float) -> None:
    """ClientQuotaControlManager.validateQuotaKeyValue: a known key, > 0, integral where a LONG/INT."""
    integral = keys.get(key)
    if integral is None:
        raise QuotaError("INVALID_REQUEST", f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaError("INVALID_REQUEST", f"Quota {key} must be greater than 0")
    if integral:
        if value > (_INT_MAX if keys is _IP_KEYS else _LONG_MAX):
            kind = "an INT" if keys is _IP_KEYS else "a LONG"
            raise QuotaError("INVALID_REQUEST", f"Proposed value for {key} is too large for {kind}.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaError("INVALID_REQUEST", f"{key} cannot be a fractional value.")


@dataclass(frozen=True)
class DescribeFilter:
    """DescribeClientQuotas components, checked as ClientQuotasImage.describe checks them."""

    exact: Mapping[str, str | None]
    specified: frozenset[str]
    strict: bool

    @classmethod
    def of(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> DescribeFilter:
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for etype, match_type, match in components:
            if not etype:
                raise QuotaError("INVALID_REQUEST", "Invalid empty entity type.")
            if etype in exact or etype in specified:
                raise QuotaError(
                    "INVALID_REQUEST", f"Entity type {etype} cannot appear more than once in the filter."
                )
            if etype not in (USER, CLIENT_ID, IP):
                raise QuotaError("UNSUPPORTED_VERSION", f"Unsupported entity type {etype}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError(
                        "INVALID_REQUEST", "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                exact[etype] = match
            elif match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
                if match is not None:
                    which = "MATCH_TYPE_DEFAULT" if match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
                    raise QuotaError(
                        "INVALID_REQUEST", f"Request specified {which}, but also specified a match string."
                    )
                if match_type == MATCH_DEFAULT:
                    exact[etype] = None
                else:
                    specified.add(etype)
            else:
                raise QuotaError("INVALID_REQUEST", f"Unknown match type {match_type}")
        named = set(exact) | specified
        if IP in named and (USER in named or CLIENT_ID in named):
            raise QuotaError(
                "INVALID_REQUEST",
                "Invalid entity filter component combination. IP filter component should not be used "
                "with user or clientId filter component.",
            )
        return cls(exact, frozenset(specified), strict)

    def matches(self, entity: Entity) -> bool:
        names = dict(entity)
        if self.strict and len(names) != len(self.exact) + len(self.specified):
            return False
        for etype, name in self.exact.items():
            if etype not in names or names[etype] != name:
                return False
        return all(etype in names for etype in self.specified)


_ANY = object()


def resolve(
    table: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[Entity, float] | None:
    """The quota on `key` that applies to (user, client_id), with the sensor it shares (the entity
    that set it, the default's name replaced by the client's), or None: not limited."""
    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    chain = (
        ((c, u), (c, u)),
        ((dc, u), (c, u)),
        ((u,), (u,)),
        ((c, du), (c, u)),
        ((dc, du), (c, u)),
        ((du,), (u,)),
        ((c,), (c,)),
        ((dc,), (c,)),
    )
    for entity, sensor in chain:
        values = table.get(entity)
        if values is not None:
            bound = values.get(key)
            if bound is not None:
                return sensor, bound
    return None
