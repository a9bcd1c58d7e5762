"""The codec's error classes: the only exceptions its public functions raise."""

from __future__ import annotations


class CodecError(Exception):
    """Base class of every encoded-KV codec error.

    ``rule`` is the id of the SPEC.md rule the raise site enforces (``KV-LEN``,
    ``PROTO-DTYPE-ID``, ...), or None where no single rule applies.
    """

    def __init__(self, *args: object, rule: str | None = None) -> None:
        super().__init__(*args)
        self.rule = rule


class CodecMismatchError(CodecError):
    """The blob is intact but was written under another configuration than the caller
    expects: a non-empty hash field (``model_id``, ``kv_layout``, ...) differs."""


class CorruptEncodedKVError(CodecError):
    """The bytes are not a valid v1 blob: bad magic or version, a truncated or
    inconsistent field, an unknown enum id, or a payload CRC mismatch."""


class UnsupportedConfigError(CodecError):
    """The caller asked for something the v1 codec cannot write or return
    (an unknown scope, e5m2 storage, a dtype outside the table, a shape that does not fit)."""


class OutputTooSmallError(UnsupportedConfigError):
    """``encode(out=)``: the caller's buffer holds fewer bytes than the blob; nothing was
    written."""
