"""Record values for the harness's own clients: random upper-case letters, as Kafka's
ProducerPerformance sends, so lz4 sees the same compressibility from both clients."""

from __future__ import annotations

import random
import string

POOL = 256  # distinct values cycled through


def letter_values(size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    letters = string.ascii_uppercase.encode()
    return [bytes(rng.choices(letters, k=size)) for _ in range(POOL)]
