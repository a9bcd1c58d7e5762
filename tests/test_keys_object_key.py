"""ObjectKey, its FS / S3-native / EncodedObjectKey forms, kv_rank packing, IPC fan-out and
the descriptors (SPEC rules KEY-*)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.keys import (
    DEFAULT_ATTN_WINDOW_DESC,
    AttnWindowDesc,
    DescriptorError,
    EncodedObjectKey,
    KeyEntry,
    KeyFormatError,
    KeyListPage,
    KVRankFieldError,
    MalformedObjectKeyStringError,
    MemoryLayoutDesc,
    ObjectKey,
    ObjectKeyInvariantError,
    PrefetchHandle,
    PrefetchMode,
    TrimPolicy,
    UnrepresentableObjectKeyError,
    filename_to_object_key,
    ipc_key_to_object_keys,
    object_key_to_filename,
    object_key_to_string,
    parse_object_key_filename,
    string_to_object_key,
)

KEY = ObjectKey(bytes.fromhex("00ab12"), "org/model", 0x04010401, 3, "alice")


def test_forms_of_one_key() -> None:
    assert object_key_to_filename(KEY) == "org-SEP-model@0x04010401@3@00ab12@alice.data"
    assert object_key_to_string(KEY) == "org/model@04010401@3@00ab12@alice"
    unsalted = ObjectKey(b"\x01", "m", 1, 26)
    assert object_key_to_filename(unsalted) == "m@0x00000001@1a@01.data"
    assert object_key_to_string(unsalted) == "m@00000001@1a@01"
    encoded = KEY.to_encoded_object_key()
    assert encoded.to_json_dict() == {
        "chunk_hash_hex": "00ab12",
        "model_name": "org/model",
        "kv_rank": 0x04010401,
        "object_group_id": 3,
        "cache_salt": "alice",
    }


def test_forms_round_trip() -> None:
    assert filename_to_object_key(object_key_to_filename(KEY)) == KEY
    assert parse_object_key_filename(object_key_to_filename(KEY)) == KEY
    assert string_to_object_key(object_key_to_string(KEY)) == KEY
    encoded = KEY.to_encoded_object_key()
    assert encoded.to_object_key() == KEY
    wire = json.loads(json.dumps(encoded.to_json_dict()))
    assert EncodedObjectKey.from_json_dict(wire) == encoded


def test_salt_may_contain_dot_data() -> None:
    key = ObjectKey(b"\x01", "m", 1, 0, "v.data")
    name = object_key_to_filename(key)
    assert name == "m@0x00000001@0@01@v.data.data"
    assert filename_to_object_key(name) == key


def test_encoded_key_optional_fields_default() -> None:
    old = {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": 1}
    assert EncodedObjectKey.from_json_dict(old).to_object_key() == ObjectKey(b"\xab", "m", 1)


def test_compute_kv_rank_packs_four_bytes() -> None:
    assert ObjectKey.ComputeKVRank(8, 5, 4, 1) == 0x08050401
    assert ObjectKey.ComputeKVRank(255, 255, 255, 255) == 0xFFFFFFFF
    assert ObjectKey.ComputeKVRank(0, 0, 0, 0) == 0
    assert ObjectKey.WorldSizeFromKVRank(0x08050401) == 8


@pytest.mark.parametrize(
    "fields", [(256, 0, 1, 0), (1, 256, 1, 0), (1, 0, 256, 0), (1, 0, 1, 256), (1, -1, 1, 0)]
)
def test_kv_rank_fields_are_one_byte(fields: tuple[int, int, int, int]) -> None:
    """KEY-KVRANK-RANGE: upstream packs (1, 256, 1, 0) as 0x01000100 + 0x01000000 overlap."""
    with pytest.raises(KVRankFieldError, match=r"0\.\.255"):
        ObjectKey.ComputeKVRank(*fields)


def test_kv_rank_field_must_be_int() -> None:
    with pytest.raises(KVRankFieldError):
        ObjectKey.ComputeKVRank(True, 0, 1, 0)


def test_int_hash_helpers() -> None:
    assert ObjectKey.IntHash2Bytes(0x01020304) == b"\x01\x02\x03\x04"
    assert ObjectKey.Bytes2IntHash(b"\x01" * 9) == int.from_bytes(b"\x01" * 8, "big")
    with pytest.raises(ObjectKeyInvariantError):
        ObjectKey.IntHash2Bytes(2**32)


@pytest.mark.parametrize(
    "fields",
    [
        {"model_name": "a@b"},
        {"model_name": "a\x00b"},
        {"model_name": 5},
        {"cache_salt": "a@b"},
        {"cache_salt": "a/b"},
        {"cache_salt": "a\\b"},
        {"cache_salt": "a\x00b"},
        {"cache_salt": "s" * 129},
        {"cache_salt": None},
        {"object_group_id": -1},
        {"object_group_id": 2**63},
        {"object_group_id": True},
        {"kv_rank": -1},
        {"kv_rank": 2**32},
        {"kv_rank": "1"},
        {"chunk_hash": "ab"},
        {"chunk_hash": bytearray(b"\x01")},
    ],
    ids=repr,
)
def test_object_key_invariants(fields: dict[str, object]) -> None:
    base: dict[str, object] = {"chunk_hash": b"\x01", "model_name": "m", "kv_rank": 1}
    with pytest.raises(ObjectKeyInvariantError):
        ObjectKey(**{**base, **fields})  # type: ignore[arg-type]


def test_salt_of_128_characters_is_accepted() -> None:
    key = ObjectKey(b"\x01", "m", 1, 0, "s" * 128)
    assert string_to_object_key(object_key_to_string(key)) == key


@pytest.mark.parametrize("model", ["a-SEP-b", "a-SEP/b", "x-SEP-", "-SEP/"])
def test_fs_writer_refuses_models_that_alias(model: str) -> None:
    """KEY-FS-SEP-ALIAS: 'a-SEP-b' would read back as 'a/b'; 'a-SEP/b' escapes to
    'a-SEP-SEP-b', which reads back as 'a/SEP-b' (the name that owns that file)."""
    with pytest.raises(UnrepresentableObjectKeyError, match="-SEP-"):
        object_key_to_filename(ObjectKey(b"\x01", model, 1))
    assert object_key_to_string(ObjectKey(b"\x01", model, 1)).startswith(model + "@")


def test_fs_writer_accepts_slashes_and_sep_like_text() -> None:
    for model in ("a/b/c", "a/SEP-b", "/SEP-x", "SEP", "-SEP", "a-SE-P-b"):
        key = ObjectKey(b"\x01", model, 1)
        assert filename_to_object_key(object_key_to_filename(key)) == key


def test_fs_writer_refuses_names_over_255_bytes() -> None:
    with pytest.raises(UnrepresentableObjectKeyError, match="NAME_MAX"):
        object_key_to_filename(ObjectKey(b"\x01" * 32, "m" * 180, 1))


@pytest.mark.parametrize("field", ["model_name", "cache_salt"])
def test_object_key_text_is_unicode(field: str) -> None:
    """KEY-TEXT-UNICODE: a lone surrogate (os.listdir's escape for non-UTF-8 bytes) is no key."""
    kwargs = {"chunk_hash": b"\x01", "model_name": "m", "kv_rank": 1, field: "s\udce1lt"}
    with pytest.raises(ObjectKeyInvariantError, match="Unicode"):
        ObjectKey(**kwargs)
    assert filename_to_object_key(object_key_to_filename(ObjectKey(b"\x01", "m", 1))) is not None
    assert filename_to_object_key("m@0x00000001@0@01@s\udce1lt.data") is None


BAD_FILENAMES = [
    "m@0x00000001@0@01",  # no .data
    "m@0x00000001@0@01.tmp",
    "m@0x00000001@0.data",  # three fields
    "m@0x00000001@0@01@s@t.data",  # six fields
    "m@0x00000001@0@01@.data",  # empty salt field
    "m@00000001@0@01.data",  # no 0x
    "m@0X00000001@0@01.data",  # upper-case prefix
    "m@0x0000001@0@01.data",  # 7 digits
    "m@0x000000001@0@01.data",  # 9 digits
    "m@0x0000000A@0@01.data",  # upper-case hex
    "m@0x00000001@+0@01.data",  # sign accepted by int()
    "m@0x00000001@00@01.data",  # leading zero group
    "m@0x00000001@0@AB.data",  # upper-case hash
    "m@0x00000001@0@a.data",  # odd-length hash
    "m@0x00000001@0@ab cd.data",  # space accepted by bytes.fromhex
    "a/b@0x00000001@0@01.data",  # raw '/'
    "m@0x00000001@0@01@a\\b.data",  # forbidden salt character
]


@pytest.mark.parametrize("name", BAD_FILENAMES)
def test_bad_filenames(name: str) -> None:
    with pytest.raises(KeyFormatError):
        parse_object_key_filename(name)
    assert filename_to_object_key(name) is None


BAD_STRINGS = [
    "m@00000001@0",
    "m@00000001@0@01@s@t",
    "m@00000001@0@01@",
    "m@0x000001@0@01",
    "m@1@0@01",
    "m@-0000001@0@01",  # what upstream writes for kv_rank=-1
    "m@100000000@0@01",  # 9 digits: what upstream writes for kv_rank=2**32
    "m@00000001@0x1@01",
    "m@00000001@0@0G",
    "m@00000001@1_0@01",
    "m@00000001@0@01@s" + "x" * 128,
]


@pytest.mark.parametrize("name", BAD_STRINGS)
def test_bad_object_names(name: str) -> None:
    with pytest.raises(KeyFormatError):
        string_to_object_key(name)


def test_readers_refuse_non_strings() -> None:
    with pytest.raises(MalformedObjectKeyStringError):
        string_to_object_key(b"m@00000001@0@01")  # type: ignore[arg-type]
    assert filename_to_object_key(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "obj",
    [
        {"chunk_hash_hex": "AB", "model_name": "m", "kv_rank": 1},
        {"chunk_hash_hex": "a", "model_name": "m", "kv_rank": 1},
        {"chunk_hash_hex": "ab", "model_name": "m"},
        {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": "1"},
        {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": True},
        {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": 1.0},
        {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": 1, "tier": "L2"},
        {"chunk_hash_hex": "ab", "model_name": "m", "kv_rank": 1, "cache_salt": 5},
        ["ab", "m", 1],
    ],
    ids=repr,
)
def test_encoded_key_json_validation(obj: object) -> None:
    with pytest.raises(MalformedObjectKeyStringError):
        EncodedObjectKey.from_json_dict(obj).to_object_key()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("encoded", "error"),
    [
        (EncodedObjectKey("zz", "m", 1), MalformedObjectKeyStringError),
        (EncodedObjectKey("AB", "m", 1), MalformedObjectKeyStringError),
        (EncodedObjectKey(b"ab", "m", 1), MalformedObjectKeyStringError),  # type: ignore[arg-type]
        (EncodedObjectKey("ab", "m@x", 1), ObjectKeyInvariantError),
        (EncodedObjectKey("ab", "m", 1, -2), ObjectKeyInvariantError),
        (EncodedObjectKey("ab", "m", 1, 0, "a/b"), ObjectKeyInvariantError),
    ],
    ids=repr,
)
def test_encoded_key_to_object_key_validation(
    encoded: EncodedObjectKey, error: type[KeyFormatError]
) -> None:
    with pytest.raises(error):
        encoded.to_object_key()


@dataclass(frozen=True)
class IPCKey:
    model_name: str
    world_size: int
    worker_id: int | None
    cache_salt: str = ""


def test_ipc_lookup_fans_out_to_every_worker() -> None:
    groups = ipc_key_to_object_keys(IPCKey("m", 2, None, "s"), [b"\x01", b"\x02"], [0, 5])
    assert [len(g) for g in groups] == [4, 4]
    expected_ranks = [0x02000200, 0x02010201]
    for group_id, keys in zip([0, 5], groups, strict=True):
        assert [(k.chunk_hash, k.kv_rank) for k in keys] == [
            (b"\x01", expected_ranks[0]),
            (b"\x01", expected_ranks[1]),
            (b"\x02", expected_ranks[0]),
            (b"\x02", expected_ranks[1]),
        ]
        assert {(k.object_group_id, k.model_name, k.cache_salt) for k in keys} == {
            (group_id, "m", "s")
        }


def test_ipc_worker_key_yields_its_rank_only() -> None:
    (keys,) = ipc_key_to_object_keys(IPCKey("m", 4, 3), [b"\x01"], [0])
    assert [k.kv_rank for k in keys] == [ObjectKey.ComputeKVRank(4, 3, 4, 3)]
    assert ipc_key_to_object_keys(IPCKey("m", 4, 3), [], [0, 1]) == [[], []]


@pytest.mark.parametrize(
    ("ipc_key", "error"),
    [
        (IPCKey("m", 0, None), DescriptorError),
        (IPCKey("m", 2, 2), DescriptorError),
        (IPCKey("m", 2, -1), DescriptorError),
        (IPCKey("m", 256, None), DescriptorError),
        (IPCKey("m@", 1, 0), ObjectKeyInvariantError),
        (IPCKey("m", 1, 0, "a/b"), ObjectKeyInvariantError),
    ],
    ids=repr,
)
def test_ipc_validation(ipc_key: IPCKey, error: type[KeyFormatError]) -> None:
    with pytest.raises(error):
        ipc_key_to_object_keys(ipc_key, [b"\x01"], [0])


def test_ipc_refuses_negative_group() -> None:
    with pytest.raises(ObjectKeyInvariantError):
        ipc_key_to_object_keys(IPCKey("m", 1, 0), [b"\x01"], [-1])


def test_attention_windows() -> None:
    desc = AttnWindowDesc([-1, 1, 3])
    assert desc.num_object_groups == 3
    assert [desc.is_full_attention(g) for g in range(3)] == [True, False, False]
    assert desc.required_chunks(0, 5) == range(5)
    assert desc.required_chunks(1, 5) == range(4, 5)
    assert desc.required_chunks(2, 5) == range(2, 5)
    assert desc.required_chunks(2, 2) == range(2)
    assert desc.required_chunks(2, 0) == range(0)
    assert DEFAULT_ATTN_WINDOW_DESC.num_chunks_in_sw == [-1]


@pytest.mark.parametrize("windows", [[0], [-2], [1, 0], [True], [1.5]], ids=repr)
def test_window_values(windows: list[int]) -> None:
    with pytest.raises(DescriptorError):
        AttnWindowDesc(windows)


def test_window_group_index_is_checked() -> None:
    """Upstream indexes the list directly: group -1 silently reads the last group."""
    desc = AttnWindowDesc([-1, 2])
    for index in (-1, 2):
        with pytest.raises(DescriptorError):
            desc.is_full_attention(index)
    with pytest.raises(DescriptorError):
        desc.required_chunks(0, -1)


def test_layout_and_listing_descriptors() -> None:
    MemoryLayoutDesc([torch.Size([2, 3])], [torch.float16])
    with pytest.raises(DescriptorError):
        MemoryLayoutDesc([torch.Size([2, 3])], [])
    entry = KeyEntry(KEY.to_encoded_object_key(), 4096)
    assert KeyListPage((entry,), None).entries[0].key.to_object_key() == KEY
    with pytest.raises(DescriptorError):
        KeyEntry(KEY.to_encoded_object_key(), -1)


def test_prefetch_types() -> None:
    assert [p.value for p in TrimPolicy] == [1, 2, 3]
    assert [m.name for m in PrefetchMode] == ["LOOKUP", "WARM"]
    handle = PrefetchHandle(-1, "req", (0, 2), 3, 1.5)
    assert handle.l2_orig_indices == ()


def test_errors_are_value_errors() -> None:
    for error in (
        ObjectKeyInvariantError,
        MalformedObjectKeyStringError,
        UnrepresentableObjectKeyError,
        KVRankFieldError,
        DescriptorError,
    ):
        assert issubclass(error, KeyFormatError) and issubclass(error, ValueError)


model_names = st.text(st.characters(blacklist_characters="@\x00", blacklist_categories=("Cs",)))
salts = st.text(
    st.characters(blacklist_characters="@/\\\x00", blacklist_categories=("Cs",)), max_size=128
)
object_keys = st.builds(
    ObjectKey,
    chunk_hash=st.binary(max_size=32),
    model_name=model_names,
    kv_rank=st.integers(0, 2**32 - 1),
    object_group_id=st.integers(0, 2**63 - 1),
    cache_salt=salts,
)


@settings(max_examples=200, deadline=None)
@given(object_keys)
def test_string_and_encoded_forms_round_trip_property(key: ObjectKey) -> None:
    assert string_to_object_key(object_key_to_string(key)) == key
    encoded = key.to_encoded_object_key()
    assert encoded.to_object_key() == key
    assert EncodedObjectKey.from_json_dict(json.loads(json.dumps(encoded.to_json_dict()))) == (
        encoded
    )


@settings(max_examples=200, deadline=None)
@given(object_keys)
def test_fs_form_round_trips_or_refuses_property(key: ObjectKey) -> None:
    escaped = key.model_name.replace("/", "-SEP-")
    salt = f"@{key.cache_salt}" if key.cache_salt else ""
    expected = (
        f"{escaped}@0x{key.kv_rank:08x}@{key.object_group_id:x}@{key.chunk_hash.hex()}{salt}.data"
    )
    aliases = escaped.replace("-SEP-", "/") != key.model_name
    if aliases or len(expected.encode()) > 255:
        with pytest.raises(UnrepresentableObjectKeyError):
            object_key_to_filename(key)
        return
    assert object_key_to_filename(key) == expected
    assert parse_object_key_filename(expected) == key


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("m@0x1aAF -SEP/.data"), max_size=40))
def test_readers_raise_only_key_format_errors(text: str) -> None:
    for reader in (string_to_object_key, parse_object_key_filename):
        try:
            key = reader(text)
        except KeyFormatError:
            continue
        assert key.kv_rank <= 0xFFFFFFFF
