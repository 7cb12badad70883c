"""The rule engine: rules in order, matched against RequestFacts, fired by their triggers.

Pure: no I/O and no clock (`now` is given where a throttle needs it), randomness only from each
probability rule's own seeded generator, so a run with the same seed and the same requests fires
the same rules. The first rule that matches a request and fires decides it (a Verdict); rules
after it are not consulted and their triggers do not advance.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kcompat.faults.facts import RequestFacts
from kcompat.faults.rules import Action, Match, Rule, rule_to_json
from kcompat.faults.triggers import TRIGGERS


@dataclass(frozen=True, slots=True)
class Verdict:
    rule_id: int
    action: Action


@dataclass(slots=True)
class RuleState:
    rule: Rule
    seen: int = 0
    fired: int = 0
    rng: random.Random | None = None
    busy_until: float = 0.0  # throttle: when the bytes sent so far have gone out at the rate
    spent: bool = False

    @property
    def state(self) -> str:
        return "spent" if self.spent else "armed"


@dataclass(slots=True)
class FaultEngine:
    rules: dict[int, RuleState] = field(default_factory=dict)
    next_id: int = 1
    fired_by_action: dict[str, int] = field(default_factory=dict)  # kept after rules are cleared

    @property
    def armed(self) -> bool:
        """Any rule set (the dispatcher asks nothing more while there is none)."""
        return bool(self.rules)

    def add(self, rule: Rule) -> int:
        rule_id = self.next_id
        self.next_id += 1
        self.rules[rule_id] = _state(rule)
        return rule_id

    def replace(self, rule_id: int, rule: Rule) -> bool:
        """A rule changed at run time; its trigger state starts afresh (False: no such rule)."""
        if rule_id not in self.rules:
            return False
        self.rules[rule_id] = _state(rule)
        return True

    def remove(self, rule_id: int) -> bool:
        return self.rules.pop(rule_id, None) is not None

    def clear(self) -> int:
        n = len(self.rules)
        self.rules.clear()
        return n

    def listing(self) -> list[dict[str, Any]]:
        return [
            {"id": rule_id, **rule_to_json(s.rule), "state": s.state, "seen": s.seen, "fired": s.fired}
            for rule_id, s in self.rules.items()
        ]

    def decide(self, facts: RequestFacts, kinds: frozenset[str] | None = None) -> Verdict | None:
        """The rule that decides this request; `kinds`: consult only rules of these actions (the
        proxy asks about a new connection with facts that name no request)."""
        for rule_id, s in self.rules.items():
            if kinds is not None and s.rule.action.kind not in kinds:
                continue
            if s.spent or not matches(s.rule.match, facts):
                continue
            s.seen += 1
            row = TRIGGERS[s.rule.trigger.kind]
            draw = s.rng.random() if s.rng is not None else 0.0
            fires = row.fires(s.rule.trigger, s.seen, s.fired, draw)
            if fires:
                s.fired += 1
                kind = s.rule.action.kind
                self.fired_by_action[kind] = self.fired_by_action.get(kind, 0) + 1
            s.spent = row.spent(s.rule.trigger, s.seen, s.fired)
            if fires:
                return Verdict(rule_id, s.rule.action)
        return None

    def throttle_delay(self, rule_id: int, size: int, now: float) -> float:
        """Seconds to hold an answer of `size` bytes so that the rule's answers go at its rate."""
        s = self.rules.get(rule_id)
        if s is None or s.rule.action.bytes_per_second <= 0:
            return 0.0
        start = max(now, s.busy_until)
        s.busy_until = start + size / s.rule.action.bytes_per_second
        return s.busy_until - now


def _state(rule: Rule) -> RuleState:
    rng = random.Random(rule.trigger.seed) if rule.trigger.kind == "probability" else None
    return RuleState(rule, rng=rng)


def matches(m: Match, f: RequestFacts) -> bool:
    if m.api_keys is not None and f.api_key not in m.api_keys:
        return False
    if m.versions is not None:
        low, high = m.versions
        if f.api_version < low or (high is not None and f.api_version > high):
            return False
    if m.client_ids is not None and (f.client_id or "") not in m.client_ids:
        return False
    if m.principals is not None and f.principal not in m.principals:
        return False
    if m.peers is not None and f.peer not in m.peers:
        return False
    if m.brokers is not None and f.broker not in m.brokers:
        return False
    if not m.needs_names:
        return True
    names = f.names
    return (
        _any(m.topics, names.topics)
        and _any(m.partitions, names.partitions)
        and _any(m.group_ids, names.group_ids)
        and _any(m.transactional_ids, names.transactional_ids)
    )


def _any(wanted: frozenset[Any] | None, present: set[Any]) -> bool:
    return wanted is None or not wanted.isdisjoint(present)
