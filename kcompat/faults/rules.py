"""Fault rules as typed data, and their JSON form (what the HTTP API and the CLI carry).

    {"match":   {"api": "Produce", "versions": "9+", "topic": "orders", "partition": [0, 1],
                 "group_id": ..., "transactional_id": ..., "client_id": ..., "principal": ...,
                 "peer": "127.0.0.1", "broker": 1},
     "action":  {"kind": "error", "error": "NOT_LEADER_OR_FOLLOWER"},
     "trigger": "once" | "always" | {"nth": 3} | {"times": 2} | {"probability": 0.2, "seed": 7}}

Every matcher is optional (absent: any); a list means any of its values. Actions (`kind`):

    error      answer with `error` (a Kafka error name or code) in every ErrorCode field of the
               response, the request's topics and partitions echoed; the handler does not run
    delay      wait `delay_ms` before the handler runs (`"when": "after"`: before the answer)
    drop       close the connection (before the handler runs, or after it: the answer is lost)
    blackhole  never answer (the client's request.timeout.ms expires; answers after it wait too)
    throttle   send answers at `bytes_per_second` (a delay for each answer's size)
    duplicate  send the answer twice (the client sees a correlation id it has no request for)
    corrupt    send the answer with a wrong correlation id (clients check it on every answer)
    partition  cut this client from this broker: every request of it is black-holed, whatever API

A rule that cannot be read raises RuleError with a message that names the field at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS

ACTIONS = ("error", "delay", "drop", "blackhole", "throttle", "duplicate", "corrupt", "partition")
BEFORE, AFTER = "before", "after"
# The actions that act on the answer, so after the handler has run.
ANSWER_ACTIONS = frozenset({"throttle", "duplicate", "corrupt"})
_ERROR_BY_CODE = {int(e): e for e in ErrorCode}
_API_BY_NAME = {api.name.lower(): key for key, api in APIS.items()}
_MAX_DELAY_MS = 3_600_000
_MAX_VALUES = 1000


class RuleError(ValueError):
    """A rule that cannot be read; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class Match:
    """What a request must be for the rule to apply; None: anything."""

    api_keys: frozenset[int] | None = None
    versions: tuple[int, int | None] | None = None  # inclusive; high None: open-ended
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    group_ids: frozenset[str] | None = None
    transactional_ids: frozenset[str] | None = None
    client_ids: frozenset[str] | None = None
    principals: frozenset[str] | None = None
    peers: frozenset[str] | None = None
    brokers: frozenset[int] | None = None

    @property
    def needs_names(self) -> bool:
        """Whether matching reads the request's body (topics, partitions, groups, transactions)."""
        return not (
            self.topics is None
            and self.partitions is None
            and self.group_ids is None
            and self.transactional_ids is None
        )


@dataclass(frozen=True, slots=True)
class Action:
    kind: str
    error: int = 0
    delay_ms: int = 0
    bytes_per_second: int = 0
    when: str = BEFORE


@dataclass(frozen=True, slots=True)
class Trigger:
    kind: str  # once, nth, times, always, probability
    n: int = 1
    probability: float = 1.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Rule:
    match: Match
    action: Action
    trigger: Trigger


# -- from JSON --------------------------------------------------------------------------------


def rule_from_json(data: object) -> Rule:
    if not isinstance(data, Mapping):
        raise RuleError("a rule is a JSON object with match, action and trigger")
    _only(data, {"match", "action", "trigger", "id"}, "rule")
    return Rule(
        match=_match(data.get("match", {})),
        action=_action(data.get("action")),
        trigger=_trigger(data.get("trigger", "always")),
    )


def _only(data: Mapping[str, Any], known: set[str], what: str) -> None:
    extra = sorted(str(k) for k in data if k not in known)
    if extra:
        raise RuleError(f"{what}: unknown field(s) {', '.join(extra)} (known: {', '.join(sorted(known))})")


def match_from_json(data: object) -> Match:
    """The `match` object of a rule (traffic capture filters by the same matchers)."""
    return _match(data)


def _match(data: object) -> Match:
    if not isinstance(data, Mapping):
        raise RuleError("match: a JSON object of matchers")
    _only(data, set(_MATCHERS) | {"versions"}, "match")
    values: dict[str, Any] = {}
    for key, (attr, kind) in _MATCHERS.items():
        if key in data and data[key] is not None:
            values[attr] = frozenset(_values(data[key], kind, key))
    if "versions" in data and data["versions"] is not None:
        values["versions"] = _versions(data["versions"])
    return Match(**values)


def _values(value: object, kind: str, key: str) -> list[Any]:
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > _MAX_VALUES:
        raise RuleError(f"match.{key}: one value or a list of 1 to {_MAX_VALUES}")
    return [_value(v, kind, key) for v in items]


def _value(v: object, kind: str, key: str) -> Any:
    if kind == "api":
        if isinstance(v, str) and v.lower() in _API_BY_NAME:
            return _API_BY_NAME[v.lower()]
        if isinstance(v, int) and not isinstance(v, bool) and v in APIS:
            return v
        raise RuleError(f"match.api: {v!r} is no Kafka API (a name such as Produce, or an API key)")
    if kind == "int":
        if isinstance(v, int) and not isinstance(v, bool) and -1 <= v < 2**31:
            return v
        raise RuleError(f"match.{key}: {v!r} is not a non-negative integer")
    if isinstance(v, str) and len(v) <= 32767:
        return v
    raise RuleError(f"match.{key}: {v!r} is not a string")


def _versions(v: object) -> tuple[int, int | None]:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v, v
    if isinstance(v, str):
        text = v.strip()
        try:
            if text.endswith("+"):
                return int(text[:-1]), None
            low, _, high = text.partition("-")
            return (int(low), int(high)) if high else (int(low), int(low))
        except ValueError:
            pass
    raise RuleError(f"match.versions: {v!r} is not a version range such as 3, 3-9 or 9+")


def _action(data: object) -> Action:
    if isinstance(data, str):
        data = {"kind": data}
    if not isinstance(data, Mapping):
        raise RuleError(f"action: an object with kind, one of {', '.join(ACTIONS)}")
    _only(data, {"kind", "error", "delay_ms", "bytes_per_second", "when"}, "action")
    kind = data.get("kind")
    if kind not in ACTIONS:
        raise RuleError(f"action.kind: {kind!r} is not one of {', '.join(ACTIONS)}")
    when = data.get("when", AFTER if kind in ANSWER_ACTIONS else BEFORE)
    if when not in (BEFORE, AFTER) or (kind in ANSWER_ACTIONS and when != AFTER):
        raise RuleError(f"action.when: {when!r} (before or after; {kind} acts on the answer: after)")
    if kind in ("error", "partition") and when != BEFORE:
        raise RuleError(f"action.when: {kind} acts before the handler runs")
    error = _error(data.get("error")) if kind == "error" else 0
    delay = _bounded(data, "delay_ms", 0, _MAX_DELAY_MS, required=kind == "delay")
    rate = _bounded(data, "bytes_per_second", 1, 2**40, required=kind == "throttle")
    return Action(kind, error=error, delay_ms=delay, bytes_per_second=rate, when=when)


def _error(v: object) -> int:
    if isinstance(v, str) and v.upper() in ErrorCode.__members__:
        return int(ErrorCode[v.upper()])
    if isinstance(v, int) and not isinstance(v, bool) and v in _ERROR_BY_CODE:
        return v
    raise RuleError(
        f"action.error: {v!r} is not a Kafka error (a name such as NOT_LEADER_OR_FOLLOWER, or its code)"
    )


def _bounded(data: Mapping[str, Any], key: str, low: int, high: int, *, required: bool) -> int:
    if key not in data:
        if required:
            raise RuleError(f"action.{key}: required for this kind")
        return 0
    v = data[key]
    if isinstance(v, int) and not isinstance(v, bool) and low <= v <= high:
        return v
    raise RuleError(f"action.{key}: {v!r} is not an integer from {low} to {high}")


def _trigger(data: object) -> Trigger:
    if data in ("once", "always"):
        return Trigger(str(data))
    if not isinstance(data, Mapping) or not data:
        raise RuleError(
            'trigger: "once", "always", {"nth": n}, {"times": n} or {"probability": p, "seed": s}'
        )
    _only(data, {"nth", "times", "probability", "seed"}, "trigger")
    if "probability" in data:
        p, seed = data["probability"], data.get("seed", 0)
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise RuleError(f"trigger.probability: {p!r} is not a number from 0 to 1")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RuleError(f"trigger.seed: {seed!r} is not an integer")
        return Trigger("probability", probability=float(p), seed=seed)
    if "seed" in data:
        raise RuleError("trigger.seed: only with probability")
    for kind in ("nth", "times"):
        if kind in data:
            n = data[kind]
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < 2**31:
                raise RuleError(f"trigger.{kind}: {n!r} is not a positive integer")
            return Trigger(kind, n=n)
    raise RuleError("trigger: one of nth, times or probability")


# JSON key -> (Match attribute, value kind)
_MATCHERS = {
    "api": ("api_keys", "api"),
    "topic": ("topics", "str"),
    "partition": ("partitions", "int"),
    "group_id": ("group_ids", "str"),
    "transactional_id": ("transactional_ids", "str"),
    "client_id": ("client_ids", "str"),
    "principal": ("principals", "str"),
    "peer": ("peers", "str"),
    "broker": ("brokers", "int"),
}


# -- to JSON ----------------------------------------------------------------------------------


def match_to_json(m: Match) -> dict[str, Any]:
    match: dict[str, Any] = {}
    for key, (attr, kind) in _MATCHERS.items():
        values = getattr(m, attr)
        if values is not None:
            names = [APIS[k].name for k in values] if kind == "api" else list(values)
            match[key] = sorted(names)
    if m.versions is not None:
        low, high = m.versions
        match["versions"] = f"{low}+" if high is None else str(low) if low == high else f"{low}-{high}"
    return match


def rule_to_json(rule: Rule) -> dict[str, Any]:
    match = match_to_json(rule.match)
    a = rule.action
    action: dict[str, Any] = {"kind": a.kind, "when": a.when}
    if a.kind == "error":
        action["error"] = _ERROR_BY_CODE[a.error].name
    if a.delay_ms:
        action["delay_ms"] = a.delay_ms
    if a.bytes_per_second:
        action["bytes_per_second"] = a.bytes_per_second
    t = rule.trigger
    trigger: Any = t.kind
    if t.kind in ("nth", "times"):
        trigger = {t.kind: t.n}
    elif t.kind == "probability":
        trigger = {"probability": t.probability, "seed": t.seed}
    return {"match": match, "action": action, "trigger": trigger}
