"""RemoteMetadata: layout, group counts 1-4, inference from length, validation
(SPEC rules PROTO-RMETA-*)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.protocol import (
    INT_TO_DTYPE,
    MemoryFormat,
    RemoteMetadata,
    RemoteMetadataError,
    ShapeError,
    UnencodableMessageError,
    UnknownIdError,
    get_remote_metadata_bytes,
    init_remote_metadata_info,
)
from lmckv.reference_impl.protocol.remote_metadata import reset_remote_metadata_info

GROUP_SHAPES = [
    torch.Size([2, 32, 256, 1024]),
    torch.Size([2, 32, 256]),
    torch.Size([256, 64]),
    torch.Size([4096]),
]
GROUP_DTYPES = [torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.uint8]


@pytest.fixture(autouse=True)
def unconfigured() -> Iterator[None]:
    reset_remote_metadata_info()
    yield
    reset_remote_metadata_info()


def metadata(groups: int, fmt: MemoryFormat = MemoryFormat.KV_2LTD) -> RemoteMetadata:
    return RemoteMetadata(1 << 20, GROUP_SHAPES[:groups], GROUP_DTYPES[:groups], fmt)


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_round_trip_inferring_group_count(groups: int) -> None:
    raw = metadata(groups).serialize()
    assert len(raw) == 8 + 20 * groups
    assert RemoteMetadata.deserialize(raw) == metadata(groups)


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_round_trip_with_configured_group_count_and_trailing_payload(groups: int) -> None:
    init_remote_metadata_info(groups)
    assert get_remote_metadata_bytes() == 8 + 20 * groups
    raw = metadata(groups).serialize()
    assert RemoteMetadata.deserialize(raw + b"payload bytes") == metadata(groups)
    buffer = bytearray(len(raw) + 4)
    metadata(groups).serialize_into(buffer)
    assert bytes(buffer[: len(raw)]) == raw and buffer[len(raw) :] == bytes(4)


def test_layout_is_little_endian_ints() -> None:
    raw = metadata(2).serialize()
    assert struct.unpack("<12i", raw) == (1 << 20, 1, 3, 2, 32, 256, 1024, 2, 2, 32, 256, 0)


def test_explicit_group_count_overrides_configuration() -> None:
    data = metadata(1).serialize()
    init_remote_metadata_info(4)
    assert RemoteMetadata.deserialize(data, num_groups=1) == metadata(1)
    with pytest.raises(RemoteMetadataError, match="needs 88 bytes"):
        RemoteMetadata.deserialize(data)


@pytest.mark.parametrize("fmt", [MemoryFormat.BINARY, MemoryFormat.BINARY_BUFFER])
def test_binary_formats_keep_four_dimensions(fmt: MemoryFormat) -> None:
    meta = RemoteMetadata(10, [torch.Size([10, 0, 0, 0])], [torch.uint8], fmt)
    assert RemoteMetadata.deserialize(meta.serialize()).shapes == [torch.Size([10, 0, 0, 0])]


@pytest.mark.parametrize("size", [0, 8, 27, 29, 47])
def test_inferred_length_must_be_8_plus_20n(size: int) -> None:
    with pytest.raises(RemoteMetadataError, match="8 \\+ 20"):
        RemoteMetadata.deserialize(bytes(size))


def test_configured_count_needs_enough_bytes() -> None:
    init_remote_metadata_info(2)
    with pytest.raises(RemoteMetadataError, match="needs 48 bytes"):
        RemoteMetadata.deserialize(bytes(28))


def test_configured_count_must_match_when_writing() -> None:
    init_remote_metadata_info(2)
    with pytest.raises(RemoteMetadataError, match="init_remote_metadata_info set 2"):
        metadata(1).serialize()


@pytest.mark.parametrize("bad", [0, -1, True, 1.0])
def test_group_count_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(RemoteMetadataError):
        init_remote_metadata_info(bad)  # type: ignore[arg-type]


def test_unconfigured_size_is_an_error() -> None:
    with pytest.raises(RemoteMetadataError, match="has not been called"):
        get_remote_metadata_bytes()


def _patched(offset: int, value: int) -> bytes:
    raw = bytearray(metadata(2).serialize())
    struct.pack_into("<i", raw, offset, value)
    return bytes(raw)


def test_reader_validation() -> None:
    with pytest.raises(RemoteMetadataError, match="negative length"):
        RemoteMetadata.deserialize(_patched(0, -1))
    with pytest.raises(UnknownIdError, match="format"):
        RemoteMetadata.deserialize(_patched(4, 42))
    with pytest.raises(UnknownIdError, match="dtype"):
        RemoteMetadata.deserialize(_patched(28, 9))
    with pytest.raises(RemoteMetadataError, match="dtype id 0"):
        RemoteMetadata.deserialize(_patched(8, 0))
    with pytest.raises(ShapeError):
        RemoteMetadata.deserialize(_patched(12, -7))


def test_writer_validation() -> None:
    with pytest.raises(RemoteMetadataError, match="shapes but"):
        RemoteMetadata(1, GROUP_SHAPES[:2], GROUP_DTYPES[:1], MemoryFormat.KV_2LTD).serialize()
    with pytest.raises(RemoteMetadataError, match=">= 1"):
        RemoteMetadata(1, [], [], MemoryFormat.KV_2LTD).serialize()
    with pytest.raises(RemoteMetadataError, match="no dtype"):
        RemoteMetadata(1, [torch.Size([1])], [None], MemoryFormat.KV_2LTD).serialize()  # type: ignore[list-item]
    with pytest.raises(UnencodableMessageError):
        RemoteMetadata(-1, [torch.Size([1])], [torch.half], MemoryFormat.KV_2LTD).serialize()
    with pytest.raises(UnencodableMessageError):
        RemoteMetadata(1, [torch.Size([1])], [torch.int32], MemoryFormat.KV_2LTD).serialize()
    with pytest.raises(ShapeError):
        RemoteMetadata(1, [torch.Size([1] * 5)], [torch.half], MemoryFormat.KV_2LTD).serialize()
    for buffer in (bytearray(20), bytes(100)):
        with pytest.raises(RemoteMetadataError, match="buffer"):
            metadata(1).serialize_into(buffer)  # type: ignore[arg-type]


shapes = st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=3).flatmap(
    lambda head: st.integers(1, 2**31 - 1).map(lambda last: torch.Size([*head, last]))
)
dtypes = st.sampled_from(sorted({d for d in INT_TO_DTYPE.values() if d is not None}, key=str))


@settings(max_examples=100, deadline=None)
@given(
    length=st.integers(0, 2**31 - 1),
    groups=st.lists(st.tuples(shapes, dtypes), min_size=1, max_size=6),
    fmt=st.sampled_from([f for f in MemoryFormat if f.name not in ("BINARY", "BINARY_BUFFER")]),
)
def test_round_trip_property(
    length: int, groups: list[tuple[torch.Size, torch.dtype]], fmt: MemoryFormat
) -> None:
    meta = RemoteMetadata(length, [s for s, _ in groups], [d for _, d in groups], fmt)
    raw = meta.serialize()
    assert len(raw) == 8 + 20 * len(groups)
    assert RemoteMetadata.deserialize(raw) == meta
    assert RemoteMetadata.deserialize(raw + b"\x01\x02", num_groups=len(groups)) == meta


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=90))
def test_reader_raises_only_typed_errors_on_random_bytes(raw: bytes) -> None:
    try:
        meta = RemoteMetadata.deserialize(raw)
    except (RemoteMetadataError, UnknownIdError, ShapeError):
        return
    assert len(meta.shapes) == (len(raw) - 8) // 20 and meta.length >= 0
