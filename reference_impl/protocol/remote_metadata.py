"""RemoteMetadata: the header stored in front of a chunk in remote backends
(SPEC "RemoteMetadata", rules PROTO-RMETA-LAYOUT, PROTO-RMETA-GROUPS).

Layout: ``length``, ``fmt``, then per group ``dtype, shape0, shape1, shape2, shape3``; every
field an int32 little-endian, so a header with ``n`` groups is ``8 + 20 * n`` bytes.

Upstream keeps the group count in process-wide state set by
:func:`init_remote_metadata_info`; the reference keeps that API. When the state is set,
readers take the first ``8 + 20 * n`` bytes of a possibly longer buffer (upstream's
``unpack_from`` behaviour, used by connectors that read header and payload together).
When it is not set, or when ``num_groups`` is passed, the count is explicit or inferred.
"""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass

import torch

from .buffers import byte_view
from .dtype_ids import dtype_from_id, dtype_to_id
from .errors import RemoteMetadataError
from .framing import TENSOR_FORMATS
from .int32 import require_int32
from .memory_format import (
    MemoryFormat,
    memory_format_from_id,
    memory_format_to_id,
)
from .shapes import pad_shape_to_4d, strip_shape_padding

REMOTE_METADATA_HEADER_BYTES = 8
"""``length`` and ``fmt``."""

REMOTE_METADATA_GROUP_BYTES = 20
"""``dtype`` and four shape slots per group."""

_configured_groups: int | None = None


def _group_count(num_groups: object) -> int:
    if isinstance(num_groups, bool):
        raise RemoteMetadataError(
            "num_groups must be an integer, got bool", rule="PROTO-RMETA-GROUPS"
        )
    try:
        count = operator.index(num_groups)  # type: ignore[arg-type]
    except TypeError:
        raise RemoteMetadataError(
            f"num_groups must be an integer, got {num_groups!r}", rule="PROTO-RMETA-GROUPS"
        ) from None
    if count < 1:
        raise RemoteMetadataError(
            f"num_groups must be >= 1, got {count}", rule="PROTO-RMETA-GROUPS"
        )
    return count


def remote_metadata_size(num_groups: int) -> int:
    """Bytes of a header with ``num_groups`` groups: ``8 + 20 * num_groups``."""
    return REMOTE_METADATA_HEADER_BYTES + REMOTE_METADATA_GROUP_BYTES * _group_count(num_groups)


def _layout(num_groups: int) -> struct.Struct:
    return struct.Struct("<" + "i" * (2 + 5 * num_groups))


def init_remote_metadata_info(num_groups: int) -> None:
    """Set the process-wide group count (upstream API). ``num_groups`` must be >= 1."""
    global _configured_groups
    _configured_groups = _group_count(num_groups)


def reset_remote_metadata_info() -> None:
    """Forget the process-wide group count (reference only; used by tests)."""
    global _configured_groups
    _configured_groups = None


def get_remote_metadata_bytes() -> int:
    """Header size for the configured group count; RemoteMetadataError if unset."""
    if _configured_groups is None:
        raise RemoteMetadataError(
            "init_remote_metadata_info() has not been called", rule="PROTO-RMETA-GROUPS"
        )
    return remote_metadata_size(_configured_groups)


@dataclass
class RemoteMetadata:
    """Header of a stored chunk: payload length, memory format, and per group dtype and
    shape."""

    length: int
    shapes: list[torch.Size]
    dtypes: list[torch.dtype | None]
    fmt: MemoryFormat

    def _params(self) -> tuple[struct.Struct, list[int]]:
        count = len(self.shapes)
        if count != len(self.dtypes):
            raise RemoteMetadataError(
                f"{count} shapes but {len(self.dtypes)} dtypes", rule="PROTO-RMETA-GROUPS"
            )
        _group_count(count)
        if _configured_groups is not None and count != _configured_groups:
            raise RemoteMetadataError(
                f"metadata has {count} groups; init_remote_metadata_info set {_configured_groups}",
                rule="PROTO-RMETA-GROUPS",
            )
        params = [
            require_int32("length", self.length, minimum=0),
            memory_format_to_id(self.fmt),
        ]
        for index, (shape, dtype) in enumerate(zip(self.shapes, self.dtypes, strict=True)):
            if dtype is None and self.fmt in TENSOR_FORMATS:  # byte objects may have none
                raise RemoteMetadataError(
                    f"group {index} of a tensor format has no dtype (PROTO-RMETA-DTYPE)",
                    rule="PROTO-RMETA-DTYPE",
                )
            params.append(dtype_to_id(dtype))
            params.extend(pad_shape_to_4d(shape))
        return _layout(count), params

    def serialize(self) -> bytes:
        """Pack the header (PROTO-RMETA-LAYOUT), byte-identical to upstream."""
        layout, params = self._params()
        return layout.pack(*params)

    def serialize_into(self, buffer: bytearray | memoryview) -> None:
        """Pack the header at offset 0 of a writable buffer at least as large as it."""
        layout, params = self._params()
        try:
            view = memoryview(buffer)
        except TypeError:
            raise RemoteMetadataError(
                f"not a buffer: {type(buffer).__name__}", rule="PROTO-RMETA-LAYOUT"
            ) from None
        if view.readonly or not view.c_contiguous or view.nbytes < layout.size:
            raise RemoteMetadataError(
                f"buffer must be writable, contiguous and >= {layout.size} bytes",
                rule="PROTO-RMETA-LAYOUT",
            )
        layout.pack_into(view.cast("B"), 0, *params)

    @staticmethod
    def deserialize(
        s: bytes | bytearray | memoryview, num_groups: int | None = None
    ) -> RemoteMetadata:
        """Read a header (PROTO-RMETA-GROUPS).

        The group count is ``num_groups`` if given, else the configured count, and the
        buffer may then be longer than the header. With neither, the buffer must be
        exactly ``8 + 20 * n`` bytes for some ``n >= 1``.
        """
        view = byte_view(s)
        count = num_groups if num_groups is not None else _configured_groups
        if count is None:
            extra = len(view) - REMOTE_METADATA_HEADER_BYTES
            if extra < REMOTE_METADATA_GROUP_BYTES or extra % REMOTE_METADATA_GROUP_BYTES:
                raise RemoteMetadataError(
                    f"RemoteMetadata length {len(view)} is not 8 + 20 * n with n >= 1",
                    rule="PROTO-RMETA-GROUPS",
                )
            count = extra // REMOTE_METADATA_GROUP_BYTES
        size = remote_metadata_size(count)
        if len(view) < size:
            raise RemoteMetadataError(
                f"RemoteMetadata with {count} groups needs {size} bytes, got {len(view)}",
                rule="PROTO-RMETA-GROUPS",
            )
        values = _layout(count).unpack_from(view)
        length, fmt_id = values[0], values[1]
        if length < 0:
            raise RemoteMetadataError(f"negative length field {length}", rule="PROTO-LENGTH-NONNEG")
        fmt = memory_format_from_id(fmt_id)
        shapes: list[torch.Size] = []
        dtypes: list[torch.dtype | None] = []
        for base in range(2, len(values), 5):
            dtype = dtype_from_id(values[base])
            if dtype is None and fmt in TENSOR_FORMATS:  # byte objects may have none
                raise RemoteMetadataError(
                    f"group {len(shapes)} of a tensor format has dtype id 0 (no dtype)",
                    rule="PROTO-RMETA-DTYPE",
                )
            dtypes.append(dtype)
            shapes.append(strip_shape_padding(values[base + 1 : base + 5], fmt))
        return RemoteMetadata(length, shapes, dtypes, fmt)
