"""Pure parsing and formatting for the client commands (no I/O, so unit tests cover all of it).

Record format strings (consume --format, produce --format), in the spirit of rpk's and kcat's:

    %t topic   %p partition   %o offset   %d timestamp (ms)   %k key   %v value
    %h headers as k=v pairs joined by ','   %K key length   %V value length   %% a percent sign
    escapes: \\n newline  \\t tab  \\r  \\0  \\\\ backslash

A null key or value prints as an empty string (its length as -1). Produce reads each input line
with the same placeholders (%t, %o, %d and the lengths are not readable there).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDERS = "tpodkvhKV"
PRODUCE_PLACEHOLDERS = "kvhp"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


class FormatError(ValueError):
    """A format string, offset or key=value argument that cannot be used; exit code 2."""


def unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_format(fmt: str, allowed: str = PLACEHOLDERS) -> list[tuple[str, str]]:
    """The format as ("lit", text) and ("ph", letter) pieces, escapes applied."""
    text = unescape(fmt)
    pieces: list[tuple[str, str]] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            literal.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise FormatError(f"format {fmt!r} ends with a lone %")
        letter = text[i + 1]
        i += 2
        if letter == "%":
            literal.append("%")
            continue
        if letter not in allowed:
            raise FormatError(
                f"format {fmt!r} has unknown placeholder %{letter} (known: {' '.join('%' + a for a in allowed)})"
            )
        if literal:
            pieces.append(("lit", "".join(literal)))
            literal = []
        pieces.append(("ph", letter))
    if literal:
        pieces.append(("lit", "".join(literal)))
    return pieces


ENCODINGS = ("text", "hex", "base64")


def encode_bytes(data: bytes | None, encoding: str = "text") -> str:
    """Bytes for printing, never lossily: hex or base64, or UTF-8 with other bytes as \\xNN escapes."""
    if data is None:
        return ""
    if encoding == "hex":
        return data.hex()
    if encoding == "base64":
        return base64.b64encode(data).decode()
    return data.decode("utf-8", errors="backslashreplace")


def decode_text(text: str, encoding: str = "text", what: str = "value") -> bytes:
    """An input field as bytes: UTF-8 text, or hex or base64 (refused when malformed)."""
    try:
        if encoding == "hex":
            return bytes.fromhex(text)
        if encoding == "base64":
            return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise FormatError(f"{what} {text[:40]!r} is not valid {encoding}") from None
    return text.encode()


def is_text(data: bytes | None) -> bool:
    if data is None:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text(data: bytes | None) -> str:
    return encode_bytes(data)


def headers_text(headers: tuple[tuple[str, bytes | None], ...] | list[tuple[str, bytes | None]]) -> str:
    return ",".join(f"{k}={_text(v)}" for k, v in headers)


@dataclass(frozen=True, slots=True)
class RecordView:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def render(
    pieces: list[tuple[str, str]], r: RecordView, key_enc: str = "text", value_enc: str = "text"
) -> str:
    out = []
    for kind, text in pieces:
        if kind == "lit":
            out.append(text)
        elif text == "t":
            out.append(r.topic)
        elif text == "p":
            out.append(str(r.partition))
        elif text == "o":
            out.append(str(r.offset))
        elif text == "d":
            out.append(str(r.timestamp))
        elif text == "k":
            out.append(encode_bytes(r.key, key_enc))
        elif text == "v":
            out.append(encode_bytes(r.value, value_enc))
        elif text == "h":
            out.append(headers_text(r.headers))
        elif text == "K":
            out.append(str(-1 if r.key is None else len(r.key)))
        elif text == "V":
            out.append(str(-1 if r.value is None else len(r.value)))
    return "".join(out)


def record_json(r: RecordView, key_enc: str = "text", value_enc: str = "text") -> dict[str, object]:
    """One record for --output json (one JSON object a line), as rpk's consume prints it. A key or
    value that is not UTF-8 is given in base64 with "key_encoding"/"value_encoding" saying so."""
    out: dict[str, object] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
    }
    for field, data, enc in (("key", r.key, key_enc), ("value", r.value, value_enc)):
        if enc == "text" and not is_text(data):
            enc = "base64"
        out[field] = None if data is None else encode_bytes(data, enc)
        if enc != "text":
            out[f"{field}_encoding"] = enc
    out["headers"] = [{"key": k, "value": None if v is None else _text(v)} for k, v in r.headers]
    return out


@dataclass(frozen=True, slots=True)
class InputRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    partition: int | None


def line_parser(fmt: str, key_enc: str = "text", value_enc: str = "text") -> Callable[[str], InputRecord]:
    """A function from one input line (without its newline) to an InputRecord, for produce --format.

    Literals separate the fields; every placeholder but the last matches as little as it can, so
    '%k %v' splits at the first space and the value keeps the rest of the line.
    """
    fmt = fmt.removesuffix("\\n")
    pieces = parse_format(fmt, PRODUCE_PLACEHOLDERS)
    if not any(kind == "ph" for kind, _ in pieces):
        raise FormatError(f"produce format {fmt!r} has no placeholder")
    seen = [text for kind, text in pieces if kind == "ph"]
    if len(seen) != len(set(seen)):
        raise FormatError(f"produce format {fmt!r} uses a placeholder twice")
    last_ph = max(i for i, (kind, _) in enumerate(pieces) if kind == "ph")
    pattern = "".join(
        re.escape(text) if kind == "lit" else f"(?P<{text}>.*)" if i == last_ph else f"(?P<{text}>.*?)"
        for i, (kind, text) in enumerate(pieces)
    )
    regex = re.compile(pattern, re.DOTALL)

    def parse(line: str) -> InputRecord:
        m = regex.fullmatch(line)
        if m is None:
            raise FormatError(f"input line {line[:60]!r} does not match the format {fmt!r}")
        got = m.groupdict()
        partition = None
        if "p" in got:
            try:
                partition = int(got["p"])
            except ValueError:
                raise FormatError(f"partition {got['p']!r} in input line is not a number") from None
        headers = parse_headers(got["h"].split(",")) if got.get("h") else ()
        return InputRecord(
            decode_text(got["k"], key_enc, "key") if "k" in got else None,
            decode_text(got["v"], value_enc, "value") if "v" in got else None,
            headers,
            partition,
        )

    return parse


def parse_key_values(items: list[str], what: str = "config") -> list[tuple[str, str]]:
    """['a=1', 'b=x=y'] -> [('a', '1'), ('b', 'x=y')]."""
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise FormatError(f"{what} {item!r} is not of the form key=value")
        out.append((name.strip(), value))
    return out


def parse_headers(items: list[str]) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((k, v.encode()) for k, v in parse_key_values(items, "header"))


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start (consume), seek (group seek) or trim to: start, end, an offset or a time."""

    kind: str  # "start", "end", "offset", "timestamp"
    value: int = 0
    relative: bool = False  # "-N": N before the end (consume --offset -3)


def parse_offset(text: str) -> OffsetSpec:
    """start|oldest|end|newest|N|-N|@TIMESTAMP_MS."""
    t = text.strip().lower()
    if t in ("start", "oldest", "beginning", "earliest"):
        return OffsetSpec("start")
    if t in ("end", "newest", "latest"):
        return OffsetSpec("end")
    if t.startswith("@"):
        try:
            ts = int(t[1:])
        except ValueError:
            raise FormatError(
                f"offset {text!r}: a timestamp is @ followed by milliseconds since the epoch"
            ) from None
        if ts < 0:
            raise FormatError(f"offset {text!r}: the timestamp is negative")
        return OffsetSpec("timestamp", ts)
    try:
        n = int(t)
    except ValueError:
        raise FormatError(f"offset {text!r} is not start, end, a number, -N or @timestamp") from None
    if n < 0:
        return OffsetSpec("offset", -n, relative=True)
    return OffsetSpec("offset", n)


def parse_partitions(text: str | None) -> list[int] | None:
    """'0,2,5-7' -> [0, 2, 5, 6, 7]; None -> None (every partition)."""
    if text is None:
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise FormatError(f"partitions {text!r}: expected numbers and ranges like 0,2,5-7") from None
    if not out or min(out) < 0:
        raise FormatError(f"partitions {text!r}: expected numbers and ranges like 0,2,5-7")
    return sorted(out)


def human_bytes(n: int | None) -> str:
    if n is None or n < 0:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable; keeps mypy sure of a return


def lag(committed: int | None, end: int) -> int | None:
    """Records a group has yet to read on a partition; None without a commit (Kafka shows '-')."""
    if committed is None:
        return None
    return max(end - committed, 0)
