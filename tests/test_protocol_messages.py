"""ClientMetaMessage and ServerMetaMessage: round trips over every table entry, property
tests, and one test per validation rule (SPEC rules PROTO-*)."""

from __future__ import annotations

import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.protocol import (
    DTYPE_TO_INT,
    INT_TO_DTYPE,
    INT_TO_LOCATION,
    LOCATION_TO_INT,
    MAX_KEY_LENGTH,
    CacheEngineKey,
    CacheKeyError,
    ClientCommand,
    ClientMetaMessage,
    KeyTooLongError,
    LayerCacheEngineKey,
    MalformedMessageError,
    MemoryFormat,
    ServerMetaMessage,
    ServerReturnCode,
    ShapeError,
    UnencodableMessageError,
    UnknownIdError,
    pad_shape_to_4d,
    strip_shape_padding,
)

KEY = CacheEngineKey("org/model", 4, 1, 0xABC, torch.bfloat16, {"lmcache.tag.user": "bob"})
WIRE_DTYPES = sorted({d for d in INT_TO_DTYPE.values() if d is not None}, key=str)
SHAPES = [torch.Size([7]), torch.Size([2, 3]), torch.Size([2, 3, 5]), torch.Size([2, 3, 5, 7])]


def client(**changes: object) -> ClientMetaMessage:
    fields: dict[str, object] = {
        "command": ClientCommand.PUT,
        "key": KEY,
        "length": 4096,
        "fmt": MemoryFormat.KV_2LTD,
        "dtype": torch.float16,
        "shape": torch.Size([2, 3, 16, 64]),
        "location": "LocalCPUBackend",
    }
    fields.update(changes)
    return ClientMetaMessage(**fields)  # type: ignore[arg-type]


def server(**changes: object) -> ServerMetaMessage:
    fields: dict[str, object] = {
        "code": ServerReturnCode.SUCCESS,
        "length": 4096,
        "fmt": MemoryFormat.KV_2LTD,
        "dtype": torch.float16,
        "shape": torch.Size([2, 3, 16, 64]),
        "location": "LocalDiskBackend",
    }
    fields.update(changes)
    return ServerMetaMessage(**fields)  # type: ignore[arg-type]


def test_pack_lengths() -> None:
    assert ClientMetaMessage.packlength() == 186 == len(client().serialize())
    assert ServerMetaMessage.packlength() == 36 == len(server().serialize())


def test_client_layout_is_little_endian_with_space_padded_key() -> None:
    raw = client().serialize()
    ints = struct.unpack_from("<9i", raw)
    assert ints == (1, 4096, 1, 2, 1, 2, 3, 16, 64)
    key = KEY.to_string().encode()
    assert raw[36 : 36 + len(key)] == key
    assert raw[36 + len(key) :] == b" " * (MAX_KEY_LENGTH - len(key))


def test_server_layout_puts_location_last() -> None:
    raw = server(shape=torch.Size([9])).serialize()
    assert struct.unpack("<9i", raw) == (200, 4096, 1, 2, 9, 0, 0, 0, 2)


@pytest.mark.parametrize("command", list(ClientCommand))
def test_every_command_round_trips(command: ClientCommand) -> None:
    assert ClientMetaMessage.deserialize(client(command=command).serialize()).command is command


@pytest.mark.parametrize("code", list(ServerReturnCode))
def test_every_return_code_round_trips(code: ServerReturnCode) -> None:
    assert ServerMetaMessage.deserialize(server(code=code).serialize()).code is code


@pytest.mark.parametrize("dtype", [None, *WIRE_DTYPES], ids=str)
def test_every_dtype_round_trips(dtype: torch.dtype | None) -> None:
    assert ClientMetaMessage.deserialize(client(dtype=dtype).serialize()).dtype == dtype
    assert ServerMetaMessage.deserialize(server(dtype=dtype).serialize()).dtype == dtype


def test_float16_is_written_as_2_and_id_1_reads_as_float16() -> None:
    assert DTYPE_TO_INT[torch.half] == 2
    raw = bytearray(server(dtype=torch.half).serialize())
    assert struct.unpack_from("<i", raw, 12) == (2,)
    struct.pack_into("<i", raw, 12, 1)
    assert ServerMetaMessage.deserialize(bytes(raw)).dtype == torch.float16


@pytest.mark.parametrize("location", list(LOCATION_TO_INT))
def test_every_location_round_trips(location: str | None) -> None:
    assert ClientMetaMessage.deserialize(client(location=location).serialize()).location == (
        location
    )
    assert ServerMetaMessage.deserialize(server(location=location).serialize()).location == (
        location
    )
    assert INT_TO_LOCATION[LOCATION_TO_INT[location]] == location


@pytest.mark.parametrize("fmt", list(MemoryFormat))
def test_every_memory_format_round_trips(fmt: MemoryFormat) -> None:
    shape = torch.Size([2, 3, 5, 7])
    assert ClientMetaMessage.deserialize(client(fmt=fmt, shape=shape).serialize()).fmt is fmt
    back = ServerMetaMessage.deserialize(server(fmt=fmt, shape=shape).serialize())
    assert back.fmt is fmt and back.shape == shape


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_every_shape_rank_round_trips(shape: torch.Size) -> None:
    assert ClientMetaMessage.deserialize(client(shape=shape).serialize()).shape == shape
    assert ServerMetaMessage.deserialize(server(shape=shape).serialize()).shape == shape


def test_layer_key_round_trips_through_client_message() -> None:
    key = LayerCacheEngineKey("m", 2, 0, 0x5, torch.float32, layer_id=31)
    back = ClientMetaMessage.deserialize(client(key=key).serialize()).key
    assert isinstance(back, LayerCacheEngineKey) and back == key


def test_shape_padding_is_lossy_for_trailing_zero_dimensions() -> None:
    """PROTO-SHAPE-PAD: [4, 0] pads to [4, 0, 0, 0] and reads back as [4] (as upstream)."""
    assert pad_shape_to_4d(torch.Size([4, 0])) == [4, 0, 0, 0]
    assert strip_shape_padding([4, 0, 0, 0]) == torch.Size([4])
    assert strip_shape_padding([0, 0, 0, 0]) == torch.Size([0])
    assert strip_shape_padding([4, 0, 0, 0], MemoryFormat.BINARY) == torch.Size([4, 0, 0, 0])
    assert strip_shape_padding([0, 5, 0, 0], MemoryFormat.BINARY_BUFFER) == torch.Size([0, 5, 0, 0])
    assert strip_shape_padding([0, 5, 0, 0], None) == torch.Size([0, 5])


# --- validation: one test per rule ------------------------------------------------------


@pytest.mark.parametrize("size", [0, 185, 187, 372])
def test_client_wrong_length_is_malformed(size: int) -> None:
    with pytest.raises(MalformedMessageError, match="186 bytes"):
        ClientMetaMessage.deserialize(bytes(size))


@pytest.mark.parametrize("size", [0, 35, 37])
def test_server_wrong_length_is_malformed(size: int) -> None:
    with pytest.raises(MalformedMessageError, match="36 bytes"):
        ServerMetaMessage.deserialize(bytes(size))


def test_reader_refuses_non_buffers() -> None:
    with pytest.raises(MalformedMessageError):
        ServerMetaMessage.deserialize("not bytes")  # type: ignore[arg-type]


def test_reader_accepts_bytearray_and_memoryview() -> None:
    raw = client().serialize()
    assert ClientMetaMessage.deserialize(bytearray(raw)) == ClientMetaMessage.deserialize(
        memoryview(raw)
    )


def _patched_client(offset: int, value: int) -> bytes:
    raw = bytearray(client().serialize())
    struct.pack_into("<i", raw, offset, value)
    return bytes(raw)


def _patched_server(offset: int, value: int) -> bytes:
    raw = bytearray(server().serialize())
    struct.pack_into("<i", raw, offset, value)
    return bytes(raw)


@pytest.mark.parametrize(
    ("offset", "value", "what"),
    [
        (0, 0, "command"),
        (0, 6, "command"),
        (8, 9, "format"),
        (8, -1, "format"),
        (12, 9, "dtype"),
        (12, -1, "dtype"),
        (16, 3, "location"),
    ],
)
def test_client_unknown_ids(offset: int, value: int, what: str) -> None:
    with pytest.raises(UnknownIdError, match=what):
        ClientMetaMessage.deserialize(_patched_client(offset, value))


@pytest.mark.parametrize(
    ("offset", "value", "what"),
    [
        (0, 201, "return code"),
        (0, 0, "return code"),
        (8, 99, "format"),
        (12, 42, "dtype"),
        (32, 7, "location"),
    ],
)
def test_server_unknown_ids(offset: int, value: int, what: str) -> None:
    with pytest.raises(UnknownIdError, match=what):
        ServerMetaMessage.deserialize(_patched_server(offset, value))


def test_negative_length_is_malformed() -> None:
    with pytest.raises(MalformedMessageError, match="negative length"):
        ClientMetaMessage.deserialize(_patched_client(4, -1))
    with pytest.raises(MalformedMessageError, match="negative length"):
        ServerMetaMessage.deserialize(_patched_server(4, -5))


def test_negative_dimension_is_a_shape_error() -> None:
    with pytest.raises(ShapeError):
        ClientMetaMessage.deserialize(_patched_client(28, -3))
    with pytest.raises(ShapeError):
        ServerMetaMessage.deserialize(_patched_server(16, -3))


def _with_key_field(field: bytes) -> bytes:
    return client().serialize()[:36] + field


def test_key_field_must_be_utf8() -> None:
    with pytest.raises(MalformedMessageError, match="UTF-8"):
        ClientMetaMessage.deserialize(_with_key_field(b"\xff" * MAX_KEY_LENGTH))


def test_key_field_padding_is_spaces_not_nul() -> None:
    key = KEY.to_string().encode()
    with pytest.raises(MalformedMessageError, match="NUL"):
        ClientMetaMessage.deserialize(_with_key_field(key.ljust(MAX_KEY_LENGTH, b"\x00")))


def test_key_field_all_padding_is_malformed() -> None:
    with pytest.raises(MalformedMessageError, match="empty"):
        ClientMetaMessage.deserialize(_with_key_field(b" " * MAX_KEY_LENGTH))


def test_key_field_keeps_leading_whitespace_and_refuses_bad_keys() -> None:
    key = b" m@1@0@ab@half"
    back = ClientMetaMessage.deserialize(_with_key_field(key.ljust(MAX_KEY_LENGTH)))
    assert back.key.model_name == " m"
    with pytest.raises(CacheKeyError):
        ClientMetaMessage.deserialize(_with_key_field(b"m@1@0".ljust(MAX_KEY_LENGTH)))


def test_key_longer_than_max_is_refused_in_bytes_not_characters() -> None:
    """PROTO-KEY-LENGTH: 100 characters of 2-byte UTF-8 are 200 bytes; upstream counts
    characters and silently truncates the field."""
    long_key = CacheEngineKey("é" * 100, 1, 0, 5, torch.float16)
    with pytest.raises(KeyTooLongError, match="exceeds maximum 150"):
        client(key=long_key).serialize()
    fits = CacheEngineKey("x" * (MAX_KEY_LENGTH - len("@1@0@5@half")), 1, 0, 5, torch.float16)
    assert len(fits.to_string()) == MAX_KEY_LENGTH
    assert ClientMetaMessage.deserialize(client(key=fits).serialize()).key == fits


def test_key_ending_in_space_is_refused() -> None:
    key = CacheEngineKey("m", 1, 0, 5, torch.float16, {"lmcache.tag.t": "v "})
    with pytest.raises(UnencodableMessageError, match="space"):
        client(key=key).serialize()


def test_unencodable_key_is_refused() -> None:
    key = CacheEngineKey("\ud800", 1, 0, 5, torch.float16)
    with pytest.raises(UnencodableMessageError, match="UTF-8"):
        client(key=key).serialize()


@pytest.mark.parametrize(
    "changes",
    [
        {"dtype": torch.int32},
        {"dtype": "float16"},
        {"location": "RemoteBackend"},
        {"length": -1},
        {"length": 2**31},
        {"length": True},
        {"length": 1.5},
        {"fmt": 1},
        {"command": 9},
        {"command": "PUT"},
        {"key": "m@1@0@ab@half"},
    ],
    ids=repr,
)
def test_client_writer_refuses_unencodable_fields(changes: dict[str, object]) -> None:
    with pytest.raises(UnencodableMessageError):
        client(**changes).serialize()


@pytest.mark.parametrize("changes", [{"code": 404}, {"length": -2}, {"dtype": torch.int64}])
def test_server_writer_refuses_unencodable_fields(changes: dict[str, object]) -> None:
    with pytest.raises(UnencodableMessageError):
        server(**changes).serialize()


@pytest.mark.parametrize(
    "shape",
    [torch.Size([1, 2, 3, 4, 5]), [1, -1], [2**31], [1.5], [True]],
    ids=["rank5", "negative", "int32-overflow", "float", "bool"],
)
def test_shape_writer_rules(shape: object) -> None:
    with pytest.raises(ShapeError):
        pad_shape_to_4d(shape)  # type: ignore[arg-type]
    with pytest.raises(ShapeError):
        server(shape=shape).serialize()


def test_strip_shape_padding_needs_four_slots() -> None:
    with pytest.raises(ShapeError):
        strip_shape_padding([1, 2, 3])


def test_errors_are_value_errors() -> None:
    for error in (MalformedMessageError, UnknownIdError, ShapeError, CacheKeyError):
        assert issubclass(error, ValueError)


# --- property tests ---------------------------------------------------------------------

dims = st.integers(min_value=0, max_value=2**31 - 1)
nonzero_dims = st.integers(min_value=1, max_value=2**31 - 1)
shapes = st.lists(dims, min_size=0, max_size=3).flatmap(
    lambda head: nonzero_dims.map(lambda last: torch.Size([*head, last]))
)
wire_dtypes = st.sampled_from([None, *WIRE_DTYPES])
formats = st.sampled_from([f for f in MemoryFormat if f.name not in ("BINARY", "BINARY_BUFFER")])
lengths = st.integers(min_value=0, max_value=2**31 - 1)
locations = st.sampled_from(list(LOCATION_TO_INT))
model_names = st.text(
    st.characters(blacklist_characters="@\x00", blacklist_categories=("Cs",)), max_size=16
)
keys = st.builds(
    CacheEngineKey,
    model_name=model_names,
    world_size=st.integers(0, 255),
    worker_id=st.integers(0, 255),
    chunk_hash=st.integers(0, 2**128),
    dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.uint8]),
    request_configs=st.dictionaries(
        st.text("abcxyz_", max_size=4).map(lambda s: "lmcache.tag." + s),
        st.text("abc%=-", min_size=1, max_size=4),
        max_size=2,
    ),
)


@settings(max_examples=80, deadline=None)
@given(
    command=st.sampled_from(list(ClientCommand)),
    key=keys,
    length=lengths,
    fmt=formats,
    dtype=wire_dtypes,
    shape=shapes,
    location=locations,
)
def test_client_message_round_trip_property(
    command: ClientCommand,
    key: CacheEngineKey,
    length: int,
    fmt: MemoryFormat,
    dtype: torch.dtype | None,
    shape: torch.Size,
    location: str | None,
) -> None:
    message = ClientMetaMessage(command, key, length, fmt, dtype, shape, location)
    try:
        raw = message.serialize()
    except KeyTooLongError:
        assert len(key.to_string().encode()) > MAX_KEY_LENGTH
        return
    assert len(raw) == 186
    back = ClientMetaMessage.deserialize(raw)
    assert back == message
    assert back.serialize() == raw


@settings(max_examples=80, deadline=None)
@given(
    code=st.sampled_from(list(ServerReturnCode)),
    length=lengths,
    fmt=formats,
    dtype=wire_dtypes,
    shape=shapes,
    location=locations,
)
def test_server_message_round_trip_property(
    code: ServerReturnCode,
    length: int,
    fmt: MemoryFormat,
    dtype: torch.dtype | None,
    shape: torch.Size,
    location: str | None,
) -> None:
    message = ServerMetaMessage(code, length, fmt, dtype, shape, location)
    raw = message.serialize()
    back = ServerMetaMessage.deserialize(raw)
    assert back == message
    assert back.serialize() == raw


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=36, max_size=36))
def test_server_reader_raises_only_typed_errors_on_random_bytes(raw: bytes) -> None:
    try:
        message = ServerMetaMessage.deserialize(raw)
    except MalformedMessageError:
        return
    except ShapeError:
        return
    assert message.length >= 0


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=36, max_size=36), st.binary(min_size=150, max_size=150))
def test_client_reader_raises_only_typed_errors_on_random_bytes(ints: bytes, key: bytes) -> None:
    try:
        ClientMetaMessage.deserialize(ints + key)
    except (MalformedMessageError, ShapeError, CacheKeyError):
        return


def test_key_holding_nul_is_refused() -> None:
    with pytest.raises(UnencodableMessageError, match="NUL"):
        client(key=CacheEngineKey("a\x00b", 1, 0, 5, torch.float16)).serialize()
