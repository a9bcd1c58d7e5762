"""The serde layer (SPEC.md, "The serde layer"): a (K, V) group serialized into a caller's
destination and deserialized into caller-provided slots, in both modes (``kv``: LMCache's
"storage-only-dequant"; ``v_only``: "split-tier", K-less blobs)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ..core.error_names import is_raw
from ..drivers.base import Driver
from . import serde_cases as sc
from .verdicts import (
    describe_tensor_diff,
    expect_error,
    expect_ok,
    require,
)

BIG = 1 << 22  # a destination larger than any blob of these tests


def _serialized(impl: Driver, request: dict[str, Any], what: str) -> bytes:
    res = expect_ok(impl.call("serde.serialize", **request), what)
    blob: bytes = res["dst"][: res["written"]]
    return blob


def _untouched(data: bytes | None, what: str) -> None:
    if data is not None and data.strip(bytes([sc.FILL])):
        changed = sum(b != sc.FILL for b in data)
        pytest.fail(f"{what}: {changed} of {len(data)} bytes were written", pytrace=False)


def _rule(rule: str, *args: Any, id: str) -> Any:
    return pytest.param(*args, id=id, marks=pytest.mark.rule(rule))


BYTES_CASES = [
    _rule("SERDE-BYTES", mode, scope, sdt, dt, shape, id=f"{mode}-{sname}-{sdt}-{dt}-{shname}")
    for mode in sc.MODES
    for sname, scope in sc.SCOPES.items()
    for sdt in sc.SCALE_DTYPES
    for dt in ("bfloat16", "float16")
    for shname, shape in sc.SHAPES.items()
    if sdt == "float32" or shname == "odd-3x5x7"
]


@pytest.mark.parametrize(("mode", "scope", "scale_dtype", "dtype", "shape"), BYTES_CASES)
def test_serialize_bytes(
    impl: Driver, mode: str, scope: int, scale_dtype: str, dtype: str, shape: list[int]
) -> None:
    """SERDE-BYTES: the serde writes the codec's blob for the same inputs (a V-only serde:
    that blob without K), returns its length and writes nothing after it; where the codec
    refuses the inputs, the serde refuses them too, typed, writing nothing."""
    require(impl, "serde.serialize", "codec.encode")
    request = sc.serialize_request(mode, scope, dtype, shape, BIG, scale_dtype=scale_dtype)
    want = sc.codec_blob(impl, request)
    res = impl.call("serde.serialize", **request)
    if not want["ok"]:
        if res["ok"] or is_raw(str(res["error"])):
            expect_error(
                res, want["error"], f"serialize, which the codec refuses ({want['error']})"
            )
        _untouched(res.get("dst"), "destination after the refusal")
        return
    expect_ok(res, f"serialize {mode}")
    written, dst = res["written"], res["dst"]
    if dst[:written] != want["blob"]:
        diff = describe_tensor_diff(dst[:written], want["blob"], torch.uint8)
        pytest.fail(f"{written} bytes written differ from the codec's blob: {diff}", pytrace=False)
    _untouched(dst[written:], "destination after the blob")


ESTIMATE_CASES = [
    _rule("SERDE-ESTIMATE", mode, scope, sdt, dt, gname, id=f"{mode}-{sname}-{sdt}-{dt}-{gname}")
    for mode in sc.MODES
    for sname, scope in sc.WRITTEN_SCOPES.items()
    for sdt in sc.SCALE_DTYPES
    for dt in ("bfloat16", "float16")
    for gname in sc.GROUPS
    if sdt in ("float32", "float64") or gname == "three-odd"
]


def _estimate(
    impl: Driver, mode: str, scope: int, scale_dtype: str, dtype: str, shapes: list[list[int]]
) -> dict[str, Any]:
    return impl.call(
        "serde.estimate",
        mode=mode,
        scale_scope=scope,
        scale_dtype=scale_dtype,
        k_dtype_tag=dtype if mode == "v_only" else None,
        **sc.layout_fields("k", shapes if mode == "kv" else None, dtype),
        **sc.layout_fields("v", shapes, dtype),
    )


@pytest.mark.parametrize(("mode", "scope", "scale_dtype", "dtype", "group"), ESTIMATE_CASES)
def test_estimate_bounds_serialize(
    impl: Driver, mode: str, scope: int, scale_dtype: str, dtype: str, group: str
) -> None:
    """SERDE-ESTIMATE: for a layout group the serializer accepts, the estimate is at least
    what serialize writes (a destination of the estimated size always suffices)."""
    require(impl, "serde.serialize", "serde.estimate")
    shapes = sc.GROUPS[group]
    request = sc.serialize_request(
        mode, scope, dtype, sc.concatenated(shapes), BIG, scale_dtype=scale_dtype
    )
    res = impl.call("serde.serialize", **request)
    if not res["ok"]:
        pytest.skip(f"the serializer does not accept this group ({res['error']})")
    est = _estimate(impl, mode, scope, scale_dtype, dtype, shapes)
    if not est["ok"]:
        pytest.skip(
            f"the estimate refuses a group serialize accepts (SERDE-ESTIMATE-SCOPE): {est['error']}"
        )
    if est["size"] < res["written"]:
        pytest.fail(f"estimate {est['size']} bytes < {res['written']} written", pytrace=False)


SCOPE_CASES = [
    _rule("SERDE-ESTIMATE-SCOPE", mode, scope, id=f"{mode}-{sname}")
    for mode in sc.MODES
    for sname, scope in sc.WRITTEN_SCOPES.items()
]


@pytest.mark.parametrize(("mode", "scope"), SCOPE_CASES)
def test_estimate_covers_serialize(impl: Driver, mode: str, scope: int) -> None:
    """SERDE-ESTIMATE-SCOPE: a scope serialize accepts can be sized by the estimate."""
    require(impl, "serde.serialize", "serde.estimate")
    shape = sc.SHAPES["llama-16x8x128"]
    res = impl.call("serde.serialize", **sc.serialize_request(mode, scope, "bfloat16", shape, BIG))
    if not res["ok"]:
        pytest.skip(f"serialize refuses this scope too ({res['error']})")
    est = _estimate(impl, mode, scope, "float32", "bfloat16", [shape])
    expect_ok(est, f"estimate of a {mode} group serialize writes in scope {scope}")


@pytest.mark.rule("SERDE-DST-SMALL")
@pytest.mark.parametrize("mode", [pytest.param(m, id=m) for m in sc.MODES])
def test_destination_too_small(impl: Driver, mode: str) -> None:
    """SERDE-DST-SMALL: a destination one byte short of the blob is a typed refusal, and
    nothing is written into it."""
    require(impl, "serde.serialize")
    shape = sc.SHAPES["odd-3x5x7"]
    blob = _serialized(impl, sc.serialize_request(mode, 0, "float16", shape, BIG), "serialize")
    res = impl.call(
        "serde.serialize", **sc.serialize_request(mode, 0, "float16", shape, len(blob) - 1)
    )
    expect_error(res, "SerdeError", "serialize into a destination one byte short")
    _untouched(res.get("dst"), "the short destination")


@pytest.mark.rule("SERDE-SLOTS")
@pytest.mark.parametrize(
    ("mode", "slots"),
    [
        pytest.param(m, sl, id=f"{m}-{sl}")
        for m, sl in (("kv", "no-k"), ("kv", "no-v"), ("v_only", "k-given"), ("v_only", "no-v"))
    ],
)
def test_serialize_slots(impl: Driver, mode: str, slots: str) -> None:
    """SERDE-SLOTS: a (K, V) serializer needs both slots; a V-only one needs V and refuses K.
    The refusal is typed and writes nothing."""
    require(impl, "serde.serialize")
    request = sc.serialize_request(mode, 0, "float16", sc.SHAPES["odd-3x5x7"], BIG)
    if slots == "no-k":
        request["k"] = None
    elif slots == "no-v":
        request["v"] = None
    else:
        request["k"] = request["v"]
    res = impl.call("serde.serialize", **request)
    expect_error(res, "SerdeError", f"serialize {mode} with {slots}")
    _untouched(res.get("dst"), "destination")


READ_CASES = [
    _rule("SERDE-READ", mode, scope, dt, shname, id=f"{mode}-{sname}-{dt}-{shname}")
    for mode in sc.MODES
    for sname, scope in sc.WRITTEN_SCOPES.items()
    for dt in ("bfloat16", "float16")
    for shname in sc.SHAPES
]


def _deserialize(
    impl: Driver, mode: str, src: bytes, k: Any, v: Any, scope: int = 0
) -> dict[str, Any]:
    def slot(spec: Any) -> tuple[Any, Any]:
        return (None, None) if spec is None else spec

    (kd, ks), (vd, vs) = slot(k), slot(v)
    return impl.call(
        "serde.deserialize",
        mode=mode,
        scale_scope=scope,
        src=src,
        fill=sc.FILL,
        k_out_dtype=kd,
        k_out_shape=ks,
        v_out_dtype=vd,
        v_out_shape=vs,
    )


@pytest.mark.parametrize(("mode", "scope", "dtype", "shape_name"), READ_CASES)
def test_read_back(impl: Driver, mode: str, scope: int, dtype: str, shape_name: str) -> None:
    """SERDE-READ, SERDE-FRAMED: the deserializer of the same mode, given the whole
    destination (blob, then unused capacity), fills K bit-exact and V dequantized per
    Q-DEQUANT, in every scope its serializer writes."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES[shape_name]
    request = sc.serialize_request(mode, scope, dtype, shape, BIG)
    res = impl.call("serde.serialize", **request)
    if not res["ok"]:
        pytest.skip(f"the serializer does not write this scope ({res['error']})")
    blob = res["dst"][: res["written"]]
    framed = res["dst"][: res["written"] + 1024]
    k_slot = (dtype, shape) if mode == "kv" else None
    out = expect_ok(_deserialize(impl, mode, framed, k_slot, (dtype, shape), scope), "deserialize")
    if mode == "kv" and out["k_out"] != request["k"]:
        pytest.fail("K is not bit-exact", pytrace=False)
    want = sc.expected_v(blob, dtype, shape)
    if out["v_out"] != want:
        diff = describe_tensor_diff(out["v_out"], want, getattr(torch, dtype), nan_matches_nan=True)
        pytest.fail(f"V differs from Q-DEQUANT of the blob: {diff}", pytrace=False)


@pytest.mark.rule("SERDE-SLOTS")
@pytest.mark.parametrize("mode", [pytest.param(m, id=m) for m in sc.MODES])
def test_skip_slots(impl: Driver, mode: str) -> None:
    """SERDE-SLOTS: (None, None) is a no-op; a None K slot leaves only V to fill."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES["odd-3x5x7"]
    blob = _serialized(impl, sc.serialize_request(mode, 0, "float16", shape, BIG), "serialize")
    expect_ok(_deserialize(impl, mode, blob, None, None), "deserialize into (None, None)")
    out = expect_ok(
        _deserialize(impl, mode, blob, None, ("float16", shape)), "deserialize into (None, V)"
    )
    if out["v_out"] != sc.expected_v(blob, "float16", shape):
        pytest.fail("V not filled as Q-DEQUANT gives it", pytrace=False)


@pytest.mark.rule("SERDE-UNTOUCHED")
def test_v_only_leaves_k_slot(impl: Driver) -> None:
    """SERDE-UNTOUCHED: the V-only deserializer never writes the K slot, even one with a
    tensor."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES["odd-3x5x7"]
    blob = _serialized(impl, sc.serialize_request("v_only", 0, "float16", shape, BIG), "serialize")
    out = expect_ok(
        _deserialize(impl, "v_only", blob, ("float16", shape), ("float16", shape)), "deserialize"
    )
    _untouched(out["k_out"], "the K slot")


@pytest.mark.rule("SERDE-UNTOUCHED")
def test_refusal_writes_no_slot(impl: Driver) -> None:
    """SERDE-UNTOUCHED: a deserialize that refuses (here: a V slot of the wrong size) has
    written no slot, K included."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES["odd-3x5x7"]
    blob = _serialized(impl, sc.serialize_request("kv", 0, "float16", shape, BIG), "serialize")
    res = _deserialize(impl, "kv", blob, ("float16", shape), ("float16", [3, 5, 6]))
    expect_error(res, "SerdeError", "deserialize into a V slot of 90 elements for 105")
    _untouched(res.get("k_out"), "the K slot after the refusal")


@pytest.mark.rule("SERDE-CROSS-MODE")
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c)
        for c in (
            "kv-reader-k-less-blob",
            "kv-reader-k-less-blob-v-only-slot",
            "v-only-reader-full-blob",
        )
    ],
)
def test_cross_mode(impl: Driver, case: str) -> None:
    """SERDE-CROSS-MODE: the (K, V) reader asked for K of a K-less blob refuses, typed,
    writing nothing; asked for V only it reads V. The V-only reader refuses a blob with K,
    typed, writing nothing."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES["odd-3x5x7"]
    writer = "kv" if case.startswith("v-only") else "v_only"
    blob = _serialized(impl, sc.serialize_request(writer, 0, "float16", shape, BIG), "serialize")
    if case == "kv-reader-k-less-blob-v-only-slot":
        out = expect_ok(
            _deserialize(impl, "kv", blob, None, ("float16", shape)), "V of a K-less blob"
        )
        if out["v_out"] != sc.expected_v(blob, "float16", shape):
            pytest.fail("V not filled as Q-DEQUANT gives it", pytrace=False)
        return
    reader = "kv" if case.startswith("kv") else "v_only"
    res = _deserialize(impl, reader, blob, ("float16", shape), ("float16", shape))
    expect_error(res, "SerdeError", f"{reader} reader given a {writer} blob")
    _untouched(res.get("k_out"), "the K slot")
    _untouched(res.get("v_out"), "the V slot")


@pytest.mark.rule("SERDE-FRAMED")
@pytest.mark.parametrize("mode", [pytest.param(m, id=m) for m in sc.MODES])
def test_corrupt_source(impl: Driver, mode: str) -> None:
    """SERDE-FRAMED: a source whose blob is corrupt (one payload byte flipped, the CRC
    unchanged) is refused with CorruptEncodedKVError, and no slot is written."""
    require(impl, "serde.serialize", "serde.deserialize")
    shape = sc.SHAPES["odd-3x5x7"]
    blob = bytearray(
        _serialized(impl, sc.serialize_request(mode, 0, "float16", shape, BIG), "serialize")
    )
    blob[-5] ^= 0x01
    k_slot = ("float16", shape) if mode == "kv" else None
    res = _deserialize(impl, mode, bytes(blob) + bytes(64), k_slot, ("float16", shape))
    expect_error(res, "CorruptEncodedKVError", "deserialize of a blob with a flipped payload byte")
    _untouched(res.get("k_out"), "the K slot")
    _untouched(res.get("v_out"), "the V slot")
