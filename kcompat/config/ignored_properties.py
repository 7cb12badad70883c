"""What a broker says of the properties it does not use: why one is accepted and ignored (in
this mode: a single node's reasons are not cluster mode's), and the hint beside an unknown one."""

from __future__ import annotations

import difflib

from kcompat.config.broker_properties import BROKER_CONFIGS, CLUSTER_IGNORED, IGNORED_PREFIXES
from kcompat.config.shorthand import NO_QUORUM, ONE_NODE
from kcompat.config.topic_properties import TOPIC_SYNONYMS


def ignored_reason(key: str) -> str | None:
    """Why kcompat accepts `key` without using it (its prefix's reason), None when it uses it."""
    for prefix, reason in IGNORED_PREFIXES.items():
        if key.startswith(prefix):
            return reason
    return None


def in_mode(key: str, reason: str | None, cluster: bool, *, defined: bool) -> str | None:
    """Why `key` is ignored in this mode, None when this mode uses it: a single node's reasons
    (nothing to replicate, no quorum) are not true of cluster mode, which ignores only some (a
    prefix of CLUSTER_IGNORED names the keys kcompat does not define)."""
    if reason is None or not cluster or reason not in (ONE_NODE, NO_QUORUM):
        return reason
    if key in CLUSTER_IGNORED:
        return CLUSTER_IGNORED[key]
    if defined:
        return None
    return next((r for k, r in CLUSTER_IGNORED.items() if k.endswith(".") and key.startswith(k)), None)


def topic_hint(key: str) -> str:
    """What to say of an unknown broker property: a topic config's broker default, or the closest name."""
    for topic_name, synonyms in TOPIC_SYNONYMS.items():
        if key == topic_name:
            return f" (a topic config; the broker default is {synonyms[0].broker_name})"
    close = difflib.get_close_matches(key, BROKER_CONFIGS, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""
