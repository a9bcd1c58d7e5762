"""Text that came from a file, a store or a peer, rendered as data wherever lmckv shows it
(terminal, log, HTML page, figure): it can neither break the output (an encoding error on a
strict UTF-8 stream, a mathtext parse in a figure) nor forge what surrounds it (a line break,
a carriage return, a bidi mark that reorders the line, an HTML tag).

- :func:`shown`: one line of text, quoted; every character that is not printable (controls,
  line and paragraph separators, format characters such as bidi marks) escaped, and every
  byte that was not UTF-8 (a surrogate from ``os.fsdecode``'s surrogateescape) written as
  ``\\xNN``. For terminals and logs.
- :func:`bare`: the same without the quotes, for a table cell that is already delimited.

The report's HTML escapes every cell and text node (``reports/html.py``); its figures render
labels as plain text, never mathtext (``reports/figures.py``).

:func:`safe_streams` makes the process's stdout and stderr write what they cannot encode as
backslash escapes instead of raising: the last guard for text that reached a print unescaped.
"""

from __future__ import annotations

import io
import sys
import unicodedata

#: Unicode categories escaped even though ``str.isprintable`` may call some printable:
#: format characters (bidi marks, zero-width joiners), line and paragraph separators.
_ESCAPED_CATEGORIES = frozenset({"Cf", "Zl", "Zp"})


def bare(text: str) -> str:
    """``text`` as data on one line, unquoted (module docstring)."""
    out = []
    for ch in text:
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch == "\\" or ch == '"':
            out.append("\\" + ch)
        elif ch.isprintable() and unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def shown(text: str) -> str:
    """``text`` as data on one line, in double quotes (module docstring)."""
    return '"' + bare(text) + '"'


def safe_streams() -> None:
    """Let stdout and stderr escape what their encoding cannot write (``backslashreplace``)
    instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
