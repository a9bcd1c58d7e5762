"""What a failing test observed, as one short stable text, for the known-failure lists.

A known-failure line records how its test fails (conformance/README.md, "Known failures"):
``[observed: <error class>: <stable key>]`` after the reason. The verdicts
(conformance/suite/verdicts.py) :func:`record` the observation right before they fail a
test; a failure that no verdict described is observed from its message
(:func:`from_message`). The runner compares a listed test's observation with the one it
lists, so a known failure that starts failing for another reason fails the run.

Observations:

- ``<error>: <key>``: the implementation raised ``<error>`` (a canonical name or
  ``raw:<module>.<class>``) with a message whose stable key is ``<key>``;
- ``accepted``: the implementation accepted an input it must reject;
- ``fields: a, b``: the fields that differ from the expected values;
- ``failed: <key>``: any other failure, keyed by its message.

The stable key of a message is its first line with every standalone number replaced by
``#``, every path by ``<path>``, runs of white space collapsed, cut to :data:`KEY_LENGTH`
characters: it names the failure without the details (sizes, ports, addresses, temporary
paths) that can change between runs.
"""

from __future__ import annotations

import re

#: The longest stable key kept.
KEY_LENGTH = 100
#: How an observation is written at the end of a known-failure line.
OBSERVED_OPEN = " [observed: "
OBSERVED_CLOSE = "]"
#: Between the observations of a failure that shows one of several ways, timing deciding
#: which (each of them a failure of the line's rule; SPEC.md's differences say why).
OR = " ‖ "

_PATH = re.compile(r"(?<![\w.])(?:/[\w.@+-]+){2,}/?")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\w])")

_current: str | None = None


def stable_key(message: str) -> str:
    """The stable key of ``message`` (module docstring)."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    text = _PATH.sub("<path>", text)
    text = _NUMBER.sub("#", text)
    text = " ".join(text.replace(OBSERVED_OPEN.strip(), "[observed").split())
    if len(text) > KEY_LENGTH:
        text = text[:KEY_LENGTH].rstrip() + "..."
    return text


def observation(kind: str, message: str | None = None) -> str:
    """``kind`` alone, or ``kind: <stable key of message>``."""
    key = stable_key(message) if message else ""
    return f"{kind}: {key}" if key else kind


def record(kind: str, message: str | None = None) -> None:
    """Note what the failing verdict observed (the runner takes it with :func:`take`)."""
    global _current
    _current = observation(kind, message)


def take() -> str | None:
    """The observation recorded since the last call, and forget it."""
    global _current
    found, _current = _current, None
    return found


def from_message(message: str) -> str:
    """The observation of a failure no verdict described: ``failed: <key>``."""
    return observation("failed", message)


def split_reason(text: str) -> tuple[str, str | None]:
    """A known-failure line's text after the test id -> (reason, observation or None)."""
    text = text.strip()
    if text.endswith(OBSERVED_CLOSE) and OBSERVED_OPEN in text:
        reason, _, observed = text.rpartition(OBSERVED_OPEN)
        return reason.strip(), observed[: -len(OBSERVED_CLOSE)].strip() or None
    return text, None


def recorded(listed: str, observed: str) -> bool:
    """Whether ``observed`` is the observation a line lists, or one of its alternatives."""
    return observed in listed.split(OR)


def join_reason(reason: str, observed: str | None) -> str:
    """The text after the test id of a known-failure line (inverse of split_reason)."""
    return f"{reason}{OBSERVED_OPEN}{observed}{OBSERVED_CLOSE}" if observed else reason
