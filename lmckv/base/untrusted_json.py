"""The one JSON reader for everything lmckv reads from a peer or a file: bounded and typed.

A testee's reply, a results file given to ``lmckv report`` or ``bench compare``, a JSON Lines
log: none of them is trusted. Python's :mod:`json` alone turns 100,000 levels of nesting into a
``RecursionError`` and a 5,000-digit integer into a bare ``ValueError``, and reads a file of any
size. Here every input is bounded by :class:`JSONLimits` (size, nesting depth, length of one
number literal, length of one string, items in one document, NaN/Infinity) and every refusal is
one :class:`UntrustedJSONError` that names the limit and what the input was.

How: the size is checked first; then one linear pre-scan of the text, which follows strings and
their escapes, bounds the depth, counts the items and measures numbers and strings *before*
:func:`json.loads` runs (so no recursion and no quadratic work); then ``json.loads`` parses, with
``parse_int``/``parse_float`` as a second guard on number length and ``parse_constant``
refusing NaN/Infinity unless allowed.

Lone surrogates written as ``\\u`` escapes (``"\\ud800"``) are accepted: they are valid JSON
(RFC 8259 §8.2) and come back as lone surrogate code points in the ``str``; a caller that
encodes such a string to UTF-8 must handle them. Bytes input must be strict UTF-8 (no BOM).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

__all__ = [
    "DEFAULT_LIMITS",
    "JSONLimits",
    "UntrustedJSONError",
    "iter_lines",
    "load_path",
    "loads",
    "read_bounded",
]


class UntrustedJSONError(ValueError):
    """Input that is not JSON lmckv accepts: malformed, or past one of its limits (the message
    names which, and ``what`` the input is); never carries the input's bytes beyond a short
    escaped excerpt."""

    limit: str | None
    what: str

    def __init__(self, message: str, *, limit: str | None = None, what: str = "JSON") -> None:
        super().__init__(message)
        self.limit = limit  # a JSONLimits field name ("max_depth", ...), None when malformed
        self.what = what


@dataclass(frozen=True)
class JSONLimits:
    """The bounds one JSON document must keep to (each refusal names the field it broke)."""

    max_bytes: int = 16 << 20  # encoded size of the document (UTF-8 bytes)
    max_depth: int = 64  # nested arrays/objects; a scalar has depth 0
    max_number_chars: int = 100  # one number literal as written: sign, digits, '.', exponent
    max_string_chars: int = 1 << 20  # one string as written between its quotes, escapes included
    max_items: int = 1_000_000  # array elements + object members, summed over the document
    allow_nan: bool = False  # the NaN / Infinity / -Infinity literals
    excerpts: bool = True  # a malformed document's error quotes a few characters near it


DEFAULT_LIMITS = JSONLimits()

# With its escapes blanked (below), a string holds no quote: it is '"[^"]*"' (an unterminated
# one runs to the end). What is left around the strings is the skeleton: brackets, commas,
# colons, whitespace and bare words (numbers, true/false/null, NaN/Infinity).
_STRING = re.compile(r'"[^"]*+"?')
_EMPTY = re.compile(r"[\[{][ \t\r\n]*+[\]}]")  # a container without items
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_ONLY_BRACKETS = {c: None for c in range(128) if chr(c) not in "[]{}"}  # for str.translate
_DEPTH = {"[": 1, "{": 1, "]": -1, "}": -1}
_CONSTANTS = frozenset({"NaN", "Infinity", "-Infinity"})


def _refuse(what: str, message: str, limit: str | None = None) -> NoReturn:
    raise UntrustedJSONError(f"{what}: {message}", limit=limit, what=what) from None


def _long_number(what: str, limits: JSONLimits) -> NoReturn:
    n = limits.max_number_chars
    _refuse(what, f"a number literal is longer than max_number_chars={n}", "max_number_chars")


def _prescan(text: str, limits: JSONLimits, what: str) -> None:
    """Bound depth, strings, numbers and items before any parser recurses: a few linear passes
    in C (regular expressions without backtracking, str methods), none per character in Python.
    Malformed text may be refused for a limit rather than as malformed."""
    # Blank the escapes that could hide a quote, keeping every length and position: left to
    # right, backslash pairs first (as escapes pair up), then the escaped quotes.
    plain = text.replace("\\\\", "__").replace('\\"', "__")
    skeleton = _STRING.sub('"', plain)  # each string becomes one '"'
    opens = skeleton.count("[") + skeleton.count("{")
    if opens > limits.max_depth:
        brackets, depth = skeleton.translate(_ONLY_BRACKETS), 0
        if not brackets.isascii():  # a non-ASCII character outside strings: malformed
            brackets = _NOT_BRACKET.sub("", brackets)
        for start in range(0, len(brackets), 1 << 16):  # in chunks: a deep prefix stops early
            chunk = brackets[start : start + (1 << 16)]
            depths = list(accumulate(map(_DEPTH.__getitem__, chunk), initial=depth))
            if max(depths) > limits.max_depth:
                _refuse(what, f"nested deeper than max_depth={limits.max_depth}", "max_depth")
            depth = depths[-1]
    if len(text) > limits.max_string_chars:
        # a quote before too many non-quotes: too long a string if an even number precede it
        quotes = last = 0
        for match in re.finditer(rf'"[^"]{{{limits.max_string_chars + 1}}}', plain):
            quotes, last = quotes + plain.count('"', last, match.start()), match.start()
            if quotes % 2 == 0:
                n = limits.max_string_chars
                _refuse(what, f"a string is longer than max_string_chars={n}", "max_string_chars")
    if len(text) > limits.max_number_chars:
        # a bare word that starts like a number (not true/false/null/NaN/Infinity), too long
        word = rf"(?<![-+.0-9A-Za-z])[-+.0-9][-+.0-9A-Za-z]{{{limits.max_number_chars},}}+"
        if any(m.group() not in _CONSTANTS for m in re.finditer(word, skeleton)):
            _long_number(what, limits)
    items = skeleton.count(",") + opens - _EMPTY.subn("", skeleton)[1]
    if items > limits.max_items:
        _refuse(what, f"more than max_items={limits.max_items} items", "max_items")


def loads(data: str | bytes, limits: JSONLimits = DEFAULT_LIMITS, *, what: str = "JSON") -> Any:
    """Parse one JSON document from an untrusted source within ``limits``; any refusal is an
    :class:`UntrustedJSONError` naming ``what`` (e.g. "testee reply", a file name)."""
    if isinstance(data, str):
        text = data
        size = len(text)
        if limits.max_bytes < size * 4 and size <= limits.max_bytes:  # exact only when in doubt
            size = len(text.encode("utf-8", "surrogatepass"))
    else:
        size = len(data)
    if size > limits.max_bytes:
        _refuse(what, f"larger than max_bytes={limits.max_bytes}", "max_bytes")
    if not isinstance(data, str):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            _refuse(what, f"not UTF-8 (byte {e.start}: {e.reason})")
    _prescan(text, limits, what)

    def parse_int(literal: str) -> int:  # parse_int/parse_float: a second guard on length
        if len(literal) > limits.max_number_chars:
            _long_number(what, limits)
        return int(literal)

    def parse_float(literal: str) -> float:
        if len(literal) > limits.max_number_chars:
            _long_number(what, limits)
        return float(literal)

    def parse_constant(name: str) -> float:
        if not limits.allow_nan:
            _refuse(what, f"{name} is not allowed (allow_nan=False)", "allow_nan")
        return float(name)

    try:
        return json.loads(
            text, parse_constant=parse_constant, parse_int=parse_int, parse_float=parse_float
        )
    except json.JSONDecodeError as e:
        near = f" (near {text[max(0, e.pos - 10) : e.pos + 10]!a})" if limits.excerpts else ""
        _refuse(what, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}{near}")
    except RecursionError:
        _refuse(what, f"nested too deep to parse (max_depth={limits.max_depth})", "max_depth")
    except UntrustedJSONError:
        raise
    except ValueError as e:  # e.g. int()'s own digit limit: a message without the input
        _refuse(what, f"malformed JSON: {type(e).__name__}")


def _open_regular(path: Path, what: str) -> BinaryIO:
    """Open ``path`` for reading without blocking on a FIFO, and only if it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            _refuse(what, f"not a regular file (mode {stat.filemode(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: Path, max_bytes: int, *, what: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused (:class:`UntrustedJSONError`, limit
    ``max_bytes``) when it holds more than ``max_bytes``; at most ``max_bytes + 1`` bytes are
    read, and a FIFO or device is refused, never read. ``OSError`` stays ``OSError``."""
    what = str(path) if what is None else what
    with _open_regular(path, what) as f:
        if os.fstat(f.fileno()).st_size > max_bytes:
            _refuse(what, f"larger than max_bytes={max_bytes}", "max_bytes")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        _refuse(what, f"larger than max_bytes={max_bytes}", "max_bytes")
    return data


def load_path(path: Path, limits: JSONLimits = DEFAULT_LIMITS, *, what: str | None = None) -> Any:
    """Parse the JSON file ``path`` within ``limits`` (read with :func:`read_bounded`)."""
    what = str(path) if what is None else what
    return loads(read_bounded(path, limits.max_bytes, what=what), limits, what=what)


def iter_lines(
    path: Path,
    limits: JSONLimits = DEFAULT_LIMITS,
    *,
    what: str | None = None,
    max_lines: int = 1_000_000,
) -> Iterator[tuple[int, Any]]:
    """Read the JSON Lines file ``path``: ``(line number, value)`` for each non-blank line (the
    first is line 1), each line bounded by ``limits`` (its size by ``max_bytes``), the file by
    ``max_lines`` lines; a refusal names the line. The file is opened at the first ``next``."""
    what = str(path) if what is None else what
    with _open_regular(path, what) as f:
        number = 0
        while line := f.readline(limits.max_bytes + 2):
            number += 1
            where = f"{what} line {number}"
            if number > max_lines:
                _refuse(where, f"more than max_lines={max_lines} lines", "max_lines")
            content = line[:-1] if line.endswith(b"\n") else line
            if len(content) > limits.max_bytes:
                _refuse(where, f"larger than max_bytes={limits.max_bytes}", "max_bytes")
            if content.strip(b" \t\r"):
                yield number, loads(content, limits, what=where)
