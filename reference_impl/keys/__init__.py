"""Reference implementation of LMCache's object keys: ObjectKey and its string forms
(FS filename, S3/native object name, EncodedObjectKey JSON), kv_rank packing, IPC fan-out,
and the descriptors that travel with keys.

The public names and call signatures match upstream ``lmcache.v1.distributed.api``
(seed revision) and the L2 adapters' key helpers; every error is a
:class:`KeyFormatError`, itself a ``ValueError``. ``MemoryLayoutDesc`` (torch shapes and
dtypes) is imported on first use, so that the key forms alone (``lmckv fsck``) load no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    DescriptorError,
    KeyFormatError,
    KVRankFieldError,
    MalformedObjectKeyStringError,
    ObjectKeyInvariantError,
    UnrepresentableObjectKeyError,
)
from .fs_form import (
    filename_to_object_key,
    object_key_to_filename,
    parse_object_key_filename,
)
from .ipc import ipc_key_to_object_keys
from .listing import KeyEntry, KeyListPage
from .object_key import EncodedObjectKey, ObjectKey
from .prefetch import PrefetchHandle, PrefetchMode, TrimPolicy
from .string_form import object_key_to_string, string_to_object_key
from .windows import DEFAULT_ATTN_WINDOW_DESC, AttnWindowDesc

if TYPE_CHECKING:
    from .layout import MemoryLayoutDesc


def __getattr__(name: str) -> Any:
    if name != "MemoryLayoutDesc":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(f"{__name__}.layout").MemoryLayoutDesc
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_ATTN_WINDOW_DESC",
    "AttnWindowDesc",
    "DescriptorError",
    "EncodedObjectKey",
    "KVRankFieldError",
    "KeyEntry",
    "KeyFormatError",
    "KeyListPage",
    "MalformedObjectKeyStringError",
    "MemoryLayoutDesc",
    "ObjectKey",
    "ObjectKeyInvariantError",
    "PrefetchHandle",
    "PrefetchMode",
    "TrimPolicy",
    "UnrepresentableObjectKeyError",
    "filename_to_object_key",
    "ipc_key_to_object_keys",
    "object_key_to_filename",
    "object_key_to_string",
    "parse_object_key_filename",
    "string_to_object_key",
]
