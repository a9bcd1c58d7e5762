"""CacheEngineKey / LayerCacheEngineKey strings and parse_cache_key (SPEC rules KEY-CACHE-*)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.protocol import (
    CacheEngineKey,
    CacheKeyError,
    LayerCacheEngineKey,
    ProtocolError,
    parse_cache_key,
)
from lmckv.reference_impl.protocol.cache_key import (
    STR_DTYPE_TO_TORCH_DTYPE,
    TORCH_DTYPE_TO_STR_DTYPE,
)


def test_string_form_of_plain_layer_and_tagged_keys() -> None:
    key = CacheEngineKey("org/m", 8, 3, 0xDEADBEEF, torch.bfloat16)
    assert key.to_string() == "org/m@8@3@deadbeef@bfloat16"
    layer = LayerCacheEngineKey("org/m", 8, 3, 0xDEADBEEF, torch.bfloat16, layer_id=12)
    assert layer.to_string() == "org/m@8@3@deadbeef@bfloat16@12"
    tagged = CacheEngineKey(
        "m", 1, 0, 1, torch.float16, {"lmcache.tag.a": "x", "other": 5, "lmcache.tag.b": 7}
    )
    assert tagged.to_string() == "m@1@0@1@half@a%x@b%7"
    assert CacheEngineKey("m", 1, 0, b"\x00\x0f", torch.float32).to_string() == "m@1@0@000f@float"


@pytest.mark.parametrize("dtype", list(TORCH_DTYPE_TO_STR_DTYPE), ids=str)
def test_every_dtype_name_round_trips(dtype: torch.dtype) -> None:
    key = CacheEngineKey("m", 1, 0, 0xAB, dtype)
    back = parse_cache_key(key.to_string())
    assert back == key and back.dtype == dtype
    assert STR_DTYPE_TO_TORCH_DTYPE[TORCH_DTYPE_TO_STR_DTYPE[dtype]] == dtype


def test_parse_dispatches_on_sixth_field() -> None:
    assert type(parse_cache_key("m@1@0@ab@half")) is CacheEngineKey
    assert type(parse_cache_key("m@1@0@ab@half@a%b")) is CacheEngineKey
    layer = parse_cache_key("m@1@0@ab@half@7@a%b")
    assert isinstance(layer, LayerCacheEngineKey) and layer.layer_id == 7
    assert layer.tags == (("a", "b"),)


def test_tag_value_may_hold_percent_and_empty_name() -> None:
    key = parse_cache_key("m@1@0@ab@half@%v@k%a%b")
    assert key.tags == (("", "v"), ("k", "a%b"))
    assert key.to_string() == "m@1@0@ab@half@%v@k%a%b"


def test_negative_and_bytes_hashes() -> None:
    """Upstream writes ``format(int, 'x')`` (``-ab`` for negatives) or ``bytes.hex()``;
    both parse, as ints (a bytes hash comes back as an int: leading zeros are lost)."""
    assert parse_cache_key("m@1@0@-ab@half").chunk_hash == -0xAB
    back = parse_cache_key(CacheEngineKey("m", 1, 0, b"\x00\xab", torch.float16).to_string())
    assert back.chunk_hash == 0xAB and back.to_string() == "m@1@0@ab@half"


def test_key_is_hashable_and_equality_depends_on_type() -> None:
    key = CacheEngineKey("m", 1, 0, 5, torch.float16)
    layer = key.get_first_layer()
    assert key != layer and layer == LayerCacheEngineKey("m", 1, 0, 5, torch.float16, layer_id=0)
    assert len({key, CacheEngineKey("m", 1, 0, 5, torch.half)}) == 1
    assert [k.layer_id for k in key.split_layers(3)] == [0, 1, 2]
    assert key.with_new_worker_id(2).worker_id == 2


def test_dict_form_round_trips() -> None:
    key = CacheEngineKey("m", 2, 1, 99, torch.float16, {"lmcache.tag.u": "v"})
    assert CacheEngineKey.from_dict(key.to_dict()) == key
    with pytest.raises(CacheKeyError):
        CacheEngineKey.from_dict({"model_name": "m"})
    with pytest.raises(CacheKeyError):
        CacheEngineKey.from_dict({**key.to_dict(), "dtype": "float128"})


@pytest.mark.parametrize(
    "text",
    [
        "m@1@0@ab",  # too few fields
        "m@1@0@ab@half16",  # unknown dtype
        "m@+1@0@ab@half",  # '+' accepted by int()
        "m@ 1@0@ab@half",  # whitespace accepted by int()
        "m@1_0@0@ab@half",  # underscore accepted by int()
        "m@01@0@ab@half",  # leading zero
        "m@1@\u0661@ab@half",  # Arabic-Indic digit accepted by int()
        "m@99999999999999999999@0@ab@half",  # int64 overflow
        "m@1@0@AB@half",  # uppercase hex
        "m@1@0@0xab@half",  # 0x prefix accepted by int(_, 16)
        "m@1@0@@half",  # empty hash
        "m@1@0@-0@half",  # non-canonical negative zero
        "m@1@0@ab@half@\u0661",  # unicode digit layer: upstream reads layer 1
        "m@1@0@ab@half@\u00b2",  # superscript two: isdigit() but int() fails upstream
        "m@1@0@ab@half@-1",  # negative layer
        "m@1@0@ab@half@01",  # leading zero layer
        "m@1@0@ab@half@x",  # neither layer id nor tag
        "m@1@0@ab@half@3@x",  # tag without '%'
        "m@1@0@ab@half@a%1@a%2",  # duplicate tag: upstream keeps the last silently
        " m@1@0@ab@half@3 ",  # trailing space in layer id
    ],
)
def test_malformed_key_strings_raise_cache_key_error(text: str) -> None:
    with pytest.raises(CacheKeyError):
        parse_cache_key(text)


def test_parse_refuses_non_strings() -> None:
    with pytest.raises(CacheKeyError):
        parse_cache_key(b"m@1@0@ab@half")  # type: ignore[arg-type]


def test_from_string_of_each_class_checks_its_form() -> None:
    with pytest.raises(CacheKeyError):
        CacheEngineKey.from_string("m@1@0@ab@half@3")
    with pytest.raises(CacheKeyError):
        LayerCacheEngineKey.from_string("m@1@0@ab@half")


@pytest.mark.parametrize(
    "key",
    [
        CacheEngineKey("a@b", 1, 0, 5, torch.float16),
        CacheEngineKey("m", 1, 0, 5, torch.float16, {"lmcache.tag.a@b": "v"}),
        CacheEngineKey("m", 1, 0, 5, torch.float16, {"lmcache.tag.a%b": "v"}),
        CacheEngineKey("m", 1, 0, 5, torch.float16, {"lmcache.tag.a": "v@w"}),
        CacheEngineKey("m", True, 0, 5, torch.float16),
        CacheEngineKey("m", 2**63, 0, 5, torch.float16),
        CacheEngineKey("m", 1, 0, b"", torch.float16),
        CacheEngineKey("m", 1, 0, 1.5, torch.float16),  # type: ignore[arg-type]
        LayerCacheEngineKey("m", 1, 0, 5, torch.float16, layer_id=-1),
    ],
    ids=[
        "model@",
        "tag-name@",
        "tag-name%",
        "tag-value@",
        "bool",
        "int64",
        "empty",
        "float",
        "negative-layer",
    ],
)
def test_writer_refuses_ambiguous_keys(key: CacheEngineKey) -> None:
    with pytest.raises(CacheKeyError):
        key.to_string()


def test_unsupported_dtype_is_refused_at_construction() -> None:
    with pytest.raises(CacheKeyError, match="Unsupported dtype"):
        CacheEngineKey("m", 1, 0, 5, torch.complex64)
    assert issubclass(CacheKeyError, ProtocolError) and issubclass(CacheKeyError, ValueError)


model_names = st.text(st.characters(blacklist_characters="@", blacklist_categories=("Cs",)))
tag_names = st.text(st.characters(blacklist_characters="@%", blacklist_categories=("Cs",)))
tag_values = st.text(st.characters(blacklist_characters="@", blacklist_categories=("Cs",)))
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def cache_keys(draw: st.DrawFn) -> CacheEngineKey:
    tags = draw(st.dictionaries(tag_names, tag_values, max_size=3))
    fields = {
        "model_name": draw(model_names),
        "world_size": draw(int64),
        "worker_id": draw(int64),
        "chunk_hash": draw(st.integers(-(2**256), 2**256) | st.binary(min_size=1, max_size=32)),
        "dtype": draw(st.sampled_from(list(TORCH_DTYPE_TO_STR_DTYPE))),
        "request_configs": {"lmcache.tag." + k: v for k, v in tags.items()},
    }
    if draw(st.booleans()):
        return LayerCacheEngineKey(**fields, layer_id=draw(st.integers(0, 2**63 - 1)))
    return CacheEngineKey(**fields)


@settings(max_examples=200, deadline=None)
@given(cache_keys())
def test_key_string_round_trip_property(key: CacheEngineKey) -> None:
    text = key.to_string()
    back = parse_cache_key(text)
    assert type(back) is type(key)
    assert parse_cache_key(back.to_string()) == back
    if isinstance(key.chunk_hash, int):
        assert back == key and back.to_string() == text
    else:
        assert back.chunk_hash == int.from_bytes(key.chunk_hash, "big")
        assert back.model_name == key.model_name and back.tags == (key.tags or None)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("m@0123456789abf-%xhalf \u0661"), max_size=30))
def test_parser_raises_only_cache_key_error(text: str) -> None:
    try:
        key = parse_cache_key(text)
    except CacheKeyError:
        return
    assert parse_cache_key(key.to_string()) == key
