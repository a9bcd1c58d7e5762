"""The serde's refusals (SPEC.md, "The serde layer").

LMCache's multi-output serde contract (``lmcache/v1/distributed/serde/multi.py``) says a
serde raises ``ValueError`` for a contract violation, so every class here is a
``ValueError``; blob corruption found while reading stays a codec error
(``CorruptEncodedKVError``).
"""

from __future__ import annotations


class SerdeError(ValueError):
    """A serde call refused; nothing was written. ``rule`` names the SPEC.md rule."""

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class SerdeSlotError(SerdeError):
    """A group slot is missing, present where it must be None, or of the wrong size."""


class DestinationTooSmallError(SerdeError):
    """The destination buffer holds fewer bytes than the blob (SERDE-DST-SMALL)."""


class SerdeModeError(SerdeError):
    """A blob of the other mode: a full blob given to the V-only reader, or a K-less blob
    whose K was asked for (SERDE-CROSS-MODE)."""
