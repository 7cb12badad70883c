"""The error codes in a response, counted as Kafka's RequestMetrics ErrorsPerSec counts them: every
`error_code` field of the answer, NONE included (six topics that failed to be created in one
CreateTopics count six).

Each response class gets a counting plan once, from its declaration (which fields are error codes,
which hold structs or lists of structs); counting an answer then walks only those fields, so a
one-partition Produce answer costs about a microsecond.
"""

from __future__ import annotations

import sys
from typing import Any

from kcompat.wire.structs import Struct

# Per class: (error-code fields, struct fields, list-of-struct fields).
Plan = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
_plans: dict[type, Plan] = {}


def _struct_class(annotation: str, module: dict[str, Any]) -> type | None:
    name = annotation.removesuffix(" | None")
    found = module.get(name)
    return found if isinstance(found, type) and issubclass(found, Struct) else None


def plan(cls: type) -> Plan:
    known = _plans.get(cls)
    if known is not None:
        return known
    module = vars(sys.modules[cls.__module__])
    annotations: dict[str, Any] = getattr(cls, "__annotations__", {})
    codes, structs, lists = [], [], []
    for field in cls.__dict__.get("__slots__", ()):
        annotation = annotations.get(field)
        if not isinstance(annotation, str):
            continue
        if field in ("error_code", "partition_error_code") and annotation == "int":
            codes.append(field)
        elif annotation.startswith("list["):
            if _counts_any(_struct_class(annotation[5:-1], module)):
                lists.append(field)
        elif _counts_any(_struct_class(annotation, module)):
            structs.append(field)
    made = _plans[cls] = (tuple(codes), tuple(structs), tuple(lists))
    return made


def _counts_any(cls: type | None) -> bool:
    """Whether a struct of `cls` can hold an error code (a leader and epoch cannot: not walked)."""
    return cls is not None and any(plan(cls))


def count_errors(body: object, counts: dict[int, int]) -> None:
    """Add the error codes found in `body` (a typed response) to `counts` (code -> count)."""
    if not isinstance(body, Struct):
        return  # NO_RESPONSE (acks=0)
    codes, structs, lists = _plans.get(type(body)) or plan(type(body))
    for field in codes:
        code = getattr(body, field)
        counts[code] = counts.get(code, 0) + 1
    for field in structs:
        count_errors(getattr(body, field), counts)
    for field in lists:
        for item in getattr(body, field):
            count_errors(item, counts)
