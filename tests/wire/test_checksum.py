"""kcompat.wire.checksum: the crc32c package's extension, loaded without the package's __init__."""

from __future__ import annotations

import subprocess
import sys

import crc32c as packaged

from kcompat.wire.checksum import crc32c


def test_check_value_of_the_castagnoli_polynomial() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720, B.4)


def test_same_as_the_package_on_bytes_and_views() -> None:
    data = bytes(range(256)) * 40
    assert crc32c(data) == packaged.crc32c(data)
    assert crc32c(memoryview(data)[17:5000]) == packaged.crc32c(data[17:5000])
    assert crc32c(bytearray(data[:3])) == packaged.crc32c(data[:3])


def test_start_up_does_not_import_importlib_metadata() -> None:
    code = "import sys, kcompat.wire.checksum as c; print('importlib.metadata' in sys.modules, 'crc32c' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]
