"""The error codes in a response, counted as Kafka's RequestMetrics ErrorsPerSec counts them: every
`error_code` (and AddPartitionsToTxn's `partition_error_code`) of the answer, NONE included (six
topics that failed to be created in one CreateTopics count six).

Each response class gets a counting function once, built from its declaration: which fields are
error codes, which hold structs or lists of structs that can hold one (a leader-and-epoch struct
cannot: it is not walked). A list of structs whose only error is their own `error_code` (a Fetch
answer's partitions) is counted in one loop with an attrgetter, not one call per struct. A
one-partition Produce answer costs 1 to 1.5 us, a 100-partition Fetch answer 18 to 37 us
(timeit on the shared 2-core machine; docs/metrics.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from kcompat.wire.structs import Struct

Counts = dict[int, int]
Count = Callable[[Any, Counts], None]
_ERROR_FIELDS = ("error_code", "partition_error_code")


class Plan:
    """The fields of a class that matter: error codes, struct fields and list-of-struct fields."""

    __slots__ = ("codes", "lists", "structs")

    def __init__(
        self,
        codes: tuple[str, ...],
        structs: tuple[tuple[str, type], ...],
        lists: tuple[tuple[str, type], ...],
    ):
        self.codes = codes
        self.structs = structs
        self.lists = lists

    def __bool__(self) -> bool:
        return bool(self.codes or self.structs or self.lists)


_plans: dict[type, Plan] = {}
_counters: dict[type, Count] = {}


def _struct_class(annotation: str, module: dict[str, Any]) -> type | None:
    found = module.get(annotation.removesuffix(" | None"))
    return found if isinstance(found, type) and issubclass(found, Struct) else None


def plan(cls: type) -> Plan:
    known = _plans.get(cls)
    if known is not None:
        return known
    _plans[cls] = Plan((), (), ())  # a class that held itself would stop here, not recurse
    module = vars(sys.modules[cls.__module__])
    annotations: dict[str, Any] = getattr(cls, "__annotations__", {})
    codes: list[str] = []
    structs: list[tuple[str, type]] = []
    lists: list[tuple[str, type]] = []
    for field in cls.__dict__.get("__slots__", ()):
        annotation = annotations.get(field)
        if not isinstance(annotation, str):
            continue
        if field in _ERROR_FIELDS and annotation == "int":
            codes.append(field)
        elif annotation.startswith("list["):
            child = _struct_class(annotation[5:-1], module)
            if child is not None and plan(child):
                lists.append((field, child))
        elif (child := _struct_class(annotation, module)) is not None and plan(child):
            structs.append((field, child))
    made = _plans[cls] = Plan(tuple(codes), tuple(structs), tuple(lists))
    return made


def _counter(cls: type) -> Count:
    known = _counters.get(cls)
    if known is not None:
        return known
    p = plan(cls)
    Get = Callable[[Any], Any]
    codes: list[Get] = [attrgetter(f) for f in p.codes]
    structs: list[tuple[Get, type, Count]] = [(attrgetter(f), c, _counter(c)) for f, c in p.structs]
    lists: list[tuple[Get, type, Count | None, Get | None]] = []
    for f, c in p.lists:
        child = plan(c)
        leaf = not child.structs and not child.lists and len(child.codes) == 1
        lists.append(
            (attrgetter(f), c, None if leaf else _counter(c), attrgetter(child.codes[0]) if leaf else None)
        )

    # An item of another class is a pre-encoded struct (wire.structs.Encoded: Metadata's cached
    # topics, which exist and so hold NONE): its bytes are not read back, it is not counted.
    def count(obj: Any, counts: Counts) -> None:
        for get in codes:
            code = get(obj)
            counts[code] = counts.get(code, 0) + 1
        for of, cls, sub in structs:
            value = of(obj)
            if type(value) is cls:
                sub(value, counts)
        for of, cls, each, code_of in lists:
            if code_of is not None:
                for item in of(obj):
                    if type(item) is cls:
                        code = code_of(item)
                        counts[code] = counts.get(code, 0) + 1
            else:
                assert each is not None
                for item in of(obj):
                    if type(item) is cls:
                        each(item, counts)

    _counters[cls] = count
    return count


def count_errors(body: object, counts: Counts) -> None:
    """Add the error codes found in `body` (a typed response) to `counts` (code -> count)."""
    if isinstance(body, Struct):  # not NO_RESPONSE (acks=0)
        (_counters.get(type(body)) or _counter(type(body)))(body, counts)
