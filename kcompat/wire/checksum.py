"""CRC-32C (Castagnoli), the checksum of v2 record batches, and of kcompat's own snapshot files.

The C implementation comes from the `crc32c` package, but its extension module is loaded on its
own: the package's __init__ imports importlib.metadata (and with it email, zipfile, ...) only to
read its own version, which costs about 20 ms of every broker start. If the extension cannot be
found that way (another layout of the package), the package is imported normally.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

_EXTENSION = "crc32c._crc32c"


def _load() -> Callable[..., int]:
    package = importlib.util.find_spec("crc32c")  # locates the package without running its __init__
    if package is not None and package.submodule_search_locations:
        spec = importlib.machinery.PathFinder.find_spec(_EXTENSION, list(package.submodule_search_locations))
        if spec is not None and spec.loader is not None:
            module: Any = sys.modules.get(_EXTENSION)
            if module is None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[_EXTENSION] = module
            if callable(getattr(module, "crc32c", None)):
                return module.crc32c  # type: ignore[no-any-return]
    from crc32c import crc32c as packaged

    return packaged


crc32c: Callable[..., int] = _load()
