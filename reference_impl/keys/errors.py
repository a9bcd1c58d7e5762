"""The keys package's error classes: the only exceptions its readers and writers raise.

Every class derives from :class:`KeyFormatError`, itself a ``ValueError`` (upstream raises
``ValueError`` for ObjectKey invariant violations, so existing ``except ValueError`` code
keeps working).
"""

from __future__ import annotations


class KeyFormatError(ValueError):
    """Base class of every object-key error (SPEC "Object keys").

    ``rule`` is the id of the SPEC.md rule the raise site enforces (``KV-LEN``,
    ``PROTO-DTYPE-ID``, ...), or None where no single rule applies.
    """

    def __init__(self, *args: object, rule: str | None = None) -> None:
        super().__init__(*args)
        self.rule = rule


class ObjectKeyInvariantError(KeyFormatError):
    """An ObjectKey field breaks an invariant: ``@`` or NUL in model_name, a bad salt,
    text that is not Unicode, a negative object group, a kv_rank outside 32 bits, a chunk
    hash that is not bytes (rules KEY-MODEL-CHARS, KEY-SALT-CHARS, KEY-SALT-LENGTH,
    KEY-TEXT-UNICODE, KEY-GROUP-RANGE, KEY-KVRANK-WIDTH, KEY-HASH-BYTES)."""


class MalformedObjectKeyStringError(KeyFormatError):
    """An FS filename, S3/native object name or EncodedObjectKey field does not follow its
    grammar (rules KEY-FS-FORM, KEY-STRING-FORM, KEY-HEX-CANONICAL, KEY-ENCODED-FIELDS)."""


class UnrepresentableObjectKeyError(KeyFormatError):
    """A valid ObjectKey has no unambiguous filename: its model name would alias another
    after the ``/`` -> ``-SEP-`` escape, or the name exceeds 255 bytes (rules
    KEY-FS-SEP-ALIAS, KEY-FS-NAME-MAX)."""


class KVRankFieldError(KeyFormatError):
    """A ComputeKVRank input is outside 0..255 (rule KEY-KVRANK-RANGE)."""


class DescriptorError(KeyFormatError):
    """A MemoryLayoutDesc, AttnWindowDesc, KeyEntry or IPC key argument is invalid (rules
    KEY-LAYOUT-LENGTHS, KEY-WINDOW-VALUES, KEY-IPC-WORKER)."""
