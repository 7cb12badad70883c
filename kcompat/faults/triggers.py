"""When a matching request fires its rule: the triggers as a table.

A rule's trigger state is two counts, `seen` (matching requests so far, this one included) and
`fired`, and for probability a seeded generator's next draw. Each kind is one row: whether this
match fires, and whether the rule is spent (it never fires again; it is kept, for its count,
until cleared).

    kind         fires when                     spent when
    once         fired == 0                     fired >= 1
    nth(n)       seen == n                      seen >= n
    times(n)     fired < n                      fired >= n
    always       every match                    never
    probability  draw < p (seeded, in order)    never
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kcompat.faults.rules import Trigger


class Row(NamedTuple):
    fires: Callable[[Trigger, int, int, float], bool]  # (trigger, seen, fired, draw)
    spent: Callable[[Trigger, int, int], bool]  # (trigger, seen, fired)


TRIGGERS: dict[str, Row] = {
    "once": Row(lambda t, seen, fired, draw: fired == 0, lambda t, seen, fired: fired >= 1),
    "nth": Row(lambda t, seen, fired, draw: seen == t.n, lambda t, seen, fired: seen >= t.n),
    "times": Row(lambda t, seen, fired, draw: fired < t.n, lambda t, seen, fired: fired >= t.n),
    "always": Row(lambda t, seen, fired, draw: True, lambda t, seen, fired: False),
    "probability": Row(lambda t, seen, fired, draw: draw < t.probability, lambda t, seen, fired: False),
}
