"""Java .properties syntax, as java.util.Properties.load reads server.properties.

    # comment            ! comment            (only where a line starts, after blanks)
    key=value            key: value           key value        (first unescaped = : or blank ends the key)
    key = a long \\
          value          (odd number of trailing backslashes: the line continues, leading blanks dropped)
    escapes: \\t \\n \\r \\f \\uXXXX, and backslash before any other character is that character

Values keep their trailing blanks here; typed parsing trims them as Kafka does. Later keys win.
"""

from __future__ import annotations

from pathlib import Path

from kcompat.config.errors import ConfigError

_BLANKS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) pairs: comments and blank lines dropped, continuations joined."""
    out: list[tuple[int, str]] = []
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        number = i + 1
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line):
            parts.append(line[:-1])
            if i >= len(natural):
                line = ""
                break
            line = natural[i].lstrip(_BLANKS)
            i += 1
        parts.append(line)
        out.append((number, "".join(parts)))
    return out


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            i += 1  # a lone trailing backslash (end of file after a continuation) means nothing
            continue
        e = text[i + 1]
        if e == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{where}: malformed \\uXXXX escape {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(e, e))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and raw value of a logical line (before unescaping)."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANKS:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Key/value pairs of a .properties text; ConfigError names `source` and the line on bad escapes."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        where = f"{source}:{number}"
        props[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return props


def read_properties_file(path: str | Path) -> dict[str, str]:
    """Read a server.properties file (UTF-8, or ISO-8859-1 as Java reads it when not UTF-8)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {str(p)!r}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, source=str(p))
