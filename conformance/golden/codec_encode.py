"""Encode vectors: stored K/V inputs and the reference's blob for them.

Covers every scope x {float16, bfloat16} x several shapes and axis orders, the special
values (all-zero pages and heads, NaN/Inf, saturation, subnormals, huge values), scale
dtypes, empty tensors, hash strings and extreme ids.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...reference_impl.kv_codec import ScaleScope
from ..core.dtype_names import dtype_name
from .codec_builder import (
    EXTERNAL,
    INT64_MAX,
    LAYOUTS,
    PER_LAYER_HEAD,
    PER_PAGE_HEAD,
    PER_TENSOR,
    SCOPE_NAMES,
    CodecVectors,
    EncodeSpec,
    Layout,
)
from .common import SplitMix64, bits_to_tensor, exact_values, random_tensor


def _kv(
    seed: int, dtype: torch.dtype, shape: list[int], lo: int = -6, hi: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    return random_tensor(seed, dtype, shape, lo, hi), random_tensor(seed + 1, dtype, shape, lo, hi)


F16, BF16 = torch.float16, torch.bfloat16
DT = {"f16": F16, "bf16": BF16}


def encode_matrix(cv: CodecVectors) -> None:
    """Every scope x {fp16, bf16} x layouts; the canonical matrix inputs among them."""
    seed = 1000
    for lay_name, lay in LAYOUTS.items():
        scopes = [PER_TENSOR, PER_LAYER_HEAD]
        if lay.page_axis is not None:
            scopes.append(PER_PAGE_HEAD)
        for dt_name, dtype in DT.items():
            for scope in scopes:
                seed += 10
                k, v = _kv(seed, dtype, lay.shape)
                flags = []
                if lay_name in ("nhd-2x4x2x8", "hnd-2x4x4x8", "tok-8x2x8"):
                    flags.append("canonical")
                if dt_name == "f16" and lay_name != "hptd-2x2x4x8":
                    flags.append("logical-shape")
                vid = f"enc-{SCOPE_NAMES[scope]}-{dt_name}-{lay_name}"
                spec = EncodeSpec(
                    vid,
                    "Q-SCALE" if scope != PER_TENSOR else "KV-LAYOUT",
                    f"{SCOPE_NAMES[scope]} scales, {dtype_name(dtype)} K/V of shape "
                    f"{lay.shape} ({lay_name}), head_axis {lay.head_axis}, page_axis "
                    f"{lay.page_axis}",
                    lay,
                    dtype,
                    scope,
                    k,
                    v,
                    flags,
                    meta={"layer_id": seed % 32, "chunk_id": seed // 10},
                )
                blob = cv.add_encode(spec)
                if vid == "enc-per_page_head-f16-nhd-2x4x2x8":
                    cv.base_blobs["base"] = blob
                    cv.base_ids["base"] = vid
    # EXTERNAL: caller scales, stored as given.
    lay = LAYOUTS["nhd-2x4x2x8"]
    for dt_name, dtype in DT.items():
        seed += 10
        k, v = _kv(seed, dtype, lay.shape)
        amax = float(v.float().abs().max())
        blob = cv.add_encode(
            EncodeSpec(
                f"enc-external-scalar-{dt_name}-nhd-2x4x2x8",
                "Q-EXTERNAL",
                "EXTERNAL scope with one caller scale (amax/448), stored as shape ()",
                lay,
                dtype,
                EXTERNAL,
                k,
                v,
                ["static-scales", "canonical"],
                v_scales=torch.tensor(amax / 448.0, dtype=torch.float32),
            )
        )
        if dt_name == "f16":
            cv.base_blobs[SCOPE_NAMES[ScaleScope.EXTERNAL]] = blob
            cv.base_ids[SCOPE_NAMES[ScaleScope.EXTERNAL]] = (
                f"enc-external-scalar-{dt_name}-nhd-2x4x2x8"
            )
        per_head = v.float().abs().amax(dim=(0, 1, 3)) / 448.0
        cv.add_encode(
            EncodeSpec(
                f"enc-external-broadcast-{dt_name}-nhd-2x4x2x8",
                "Q-EXTERNAL",
                "EXTERNAL scope with caller scales of shape (1, 1, H, 1), broadcast over V",
                lay,
                dtype,
                EXTERNAL,
                k,
                v,
                ["static-scales"],
                v_scales=per_head.reshape(1, 1, -1, 1),
            )
        )


def _set_group(t: torch.Tensor, index: tuple[Any, ...], value: float) -> torch.Tensor:
    t = t.clone()
    t[index] = value
    return t


def special_values(cv: CodecVectors) -> None:
    lay = LAYOUTS["nhd-2x4x2x8"]
    shape = lay.shape
    for dt_name, dtype in DT.items():
        k, v = _kv(2000 + len(dt_name), dtype, shape)
        zero = torch.zeros(shape, dtype=dtype)
        cases: list[tuple[str, str, str, int, torch.Tensor, torch.Tensor, list[str]]] = [
            ("zero-all-per_tensor", "Q-SCALE", "V all zero", PER_TENSOR, k, zero, ["all-zero"]),
            (
                "zero-all-per_page_head",
                "Q-SCALE",
                "V all zero",
                PER_PAGE_HEAD,
                k,
                zero,
                ["all-zero"],
            ),
            (
                "zero-page-per_page_head",
                "Q-SCALE",
                "page 1 of V all zero",
                PER_PAGE_HEAD,
                k,
                _set_group(v, (1,), 0.0),
                ["zero-group"],
            ),
            (
                "zero-head-per_layer_head",
                "Q-SCALE",
                "head 0 of V all zero",
                PER_LAYER_HEAD,
                k,
                _set_group(v, (slice(None), slice(None), 0), 0.0),
                ["zero-group"],
            ),
            (
                "nan-per_tensor",
                "Q-NONFINITE",
                "one NaN in V: amax is NaN, scale 1.0, that element stays NaN",
                PER_TENSOR,
                k,
                _set_group(v, (0, 1, 1, 2), float("nan")),
                ["nonfinite"],
            ),
            (
                "nan-per_page_head",
                "Q-NONFINITE",
                "one NaN in page 1 head 0: only that group's scale becomes 1.0",
                PER_PAGE_HEAD,
                k,
                _set_group(v, (1, 2, 0, 5), float("nan")),
                ["nonfinite"],
            ),
            (
                "inf-per_tensor",
                "Q-NONFINITE",
                "+Inf in V: scale Inf, finite values quantize to 0, Inf/Inf is NaN",
                PER_TENSOR,
                k,
                _set_group(v, (1, 0, 1, 7), float("inf")),
                ["nonfinite"],
            ),
            (
                "inf-per_layer_head",
                "Q-NONFINITE",
                "-Inf in head 1 only",
                PER_LAYER_HEAD,
                k,
                _set_group(v, (0, 3, 1, 0), float("-inf")),
                ["nonfinite"],
            ),
        ]
        nan_k = k.clone().view(torch.int16)
        flat = nan_k.reshape(-1)
        flat[0] = 0x7D01 if dtype == F16 else 0x7F81  # signalling NaN with payload
        flat[1] = 0x7C00 if dtype == F16 else 0x7F80  # +Inf
        flat[2] = -1024 if dtype == F16 else -128  # -Inf (0xFC00 / 0xFF80)
        flat[3] = 0x7E00 if dtype == F16 else 0x7FC0  # quiet NaN
        cases.append(
            (
                "k-nonfinite-per_tensor",
                "KV-PAYLOAD",
                "K holds a signalling NaN with payload, +Inf, -Inf, quiet NaN: K bytes are "
                "stored and returned bit-exactly",
                PER_TENSOR,
                nan_k.view(dtype),
                v,
                ["k-nonfinite"],
            )
        )
        # Wide dynamic range: page 0 tiny, page 1 large.
        rng = SplitMix64(2100 + len(dt_name))
        half = math.prod(shape) // 2
        tiny = exact_values(rng, half, dtype, -12, -8)
        large = exact_values(rng, half, dtype, 6, 10)
        wide = bits_to_tensor(tiny + large, dtype, shape)
        for scope in (PER_TENSOR, PER_PAGE_HEAD):
            cases.append(
                (
                    f"dynamic-range-{SCOPE_NAMES[scope]}",
                    "Q-ROUND",
                    "page 0 values ~2^-10, page 1 ~2^8: per-tensor scales push page 0 into "
                    "FP8 subnormals or zero, per-page scales keep it",
                    scope,
                    k,
                    wide,
                    ["dynamic-range", "fp8-subnormal"],
                )
            )
        # Float16/bfloat16 subnormal inputs.
        sub_bits = [
            (b & 0x8000) | (b & 0x3FF if dtype == F16 else b & 0x7F) | 1
            for b in exact_values(SplitMix64(2200), math.prod(shape), dtype, 0, 0)
        ]
        cases.append(
            (
                "input-subnormal-per_layer_head",
                "Q-ROUND",
                "every V value is a subnormal of its dtype",
                PER_LAYER_HEAD,
                k,
                bits_to_tensor(sub_bits, dtype, shape),
                ["input-subnormal"],
            )
        )
        hi_exp = 15 if dtype == F16 else 127
        huge = bits_to_tensor(
            exact_values(SplitMix64(2300), math.prod(shape), dtype, hi_exp - 2, hi_exp),
            dtype,
            shape,
        )
        cases.append(
            (
                "huge-per_tensor",
                "Q-SCALE",
                "values near the dtype maximum",
                PER_TENSOR,
                huge,
                huge,
                ["huge"],
            )
        )
        if dtype == BF16:
            tiny_bf = bits_to_tensor(
                exact_values(SplitMix64(2400), math.prod(shape), dtype, -126, -122),
                dtype,
                shape,
            )
            cases.append(
                (
                    "scale-subnormal-per_page_head",
                    "Q-SCALE",
                    "bfloat16 values ~1e-38: amax/448 is a float32 subnormal scale, which "
                    "flush-to-zero arithmetic would turn into 0",
                    PER_PAGE_HEAD,
                    k,
                    tiny_bf,
                    ["scale-subnormal"],
                )
            )
        for name, rule, comment, scope, kk, vv, flags in cases:
            cv.add_encode(
                EncodeSpec(
                    f"enc-{name}-{dt_name}",
                    rule,
                    comment,
                    lay,
                    dtype,
                    scope,
                    kk,
                    vv,
                    flags,
                )
            )
        # Static scales a quarter of amax per head: a quarter of the values saturate.
        amax = v.float().abs().amax(dim=(0, 1, 3))
        cv.add_encode(
            EncodeSpec(
                f"enc-saturate-static-per_layer_head-{dt_name}",
                "Q-ROUND",
                "static per-head scales of amax/(4*448): values above a quarter of amax "
                "saturate at +-448",
                lay,
                dtype,
                PER_LAYER_HEAD,
                k,
                v,
                ["saturate", "static-scales"],
                v_scales=amax / (4 * 448.0),
            )
        )
        # Static float32 scales stored as float16: V must be quantized with the rounded ones.
        cv.add_encode(
            EncodeSpec(
                f"enc-static-scale-float16-per_layer_head-{dt_name}",
                "Q-SCALE",
                "static float32 scales a little above amax/448, stored as float16: V is "
                "quantized with the stored (rounded) scales, not the float32 ones given",
                lay,
                dtype,
                PER_LAYER_HEAD,
                k,
                v,
                ["static-scales", "scale-dtype"],
                v_scales=amax / 448.0 * 4.0 * 1.0007,
                scale_dtype="float16",
            )
        )
        for scale_dtype in ("float16", "bfloat16", "float64"):
            cv.add_encode(
                EncodeSpec(
                    f"enc-scale-{scale_dtype}-per_page_head-{dt_name}",
                    "Q-SCALE",
                    f"scales computed in float32, stored as {scale_dtype}; V is quantized "
                    "with the stored (rounded) scales",
                    lay,
                    dtype,
                    PER_PAGE_HEAD,
                    k,
                    v,
                    ["scale-dtype"],
                    scale_dtype=scale_dtype,
                )
            )
    empty_lay = Layout("tok-0x2x8", [0, 2, 8], -2, None, "", ["unpaged"])
    for dt_name, dtype in DT.items():
        z = torch.empty([0, 2, 8], dtype=dtype)
        for scope in (PER_TENSOR, PER_LAYER_HEAD):
            cv.add_encode(
                EncodeSpec(
                    f"enc-empty-{SCOPE_NAMES[scope]}-{dt_name}",
                    "KV-LEN",
                    "zero tokens: empty K and V payloads, scales still present",
                    empty_lay,
                    dtype,
                    scope,
                    z,
                    z,
                    ["empty"],
                )
            )


def metadata(cv: CodecVectors) -> None:
    lay = LAYOUTS["nhd-2x4x2x8"]
    k, v = _kv(3000, F16, lay.shape)
    cv.add_encode(
        EncodeSpec(
            "enc-hashes-all-set",
            "KV-HASHES",
            "all six hash strings set, with multi-byte UTF-8 (2, 3 and 4 bytes)",
            lay,
            F16,
            PER_PAGE_HEAD,
            k,
            v,
            ["hashes"],
            hashes={
                "model_id": "meta-llama/Llama-3.1-8B-Instruct",
                "model_revision_hash": "0e9e39f249a16976918f6564b8830bc894c89659",
                "tokenizer_hash": "tök-ß-ü",
                "rope_config_hash": "θ=500000;scaling=llama3",
                "attention_backend": "FLASH_ATTN/⚡",
                "kv_layout": "NHD",
            },
        )
    )
    cv.base_blobs["hashes"] = cv.files.files["v1/codec/enc-hashes-all-set.bin"]
    cv.base_ids["hashes"] = "enc-hashes-all-set"
    cv.add_encode(
        EncodeSpec(
            "enc-hashes-long-value",
            "KV-HASHES",
            "a 65535-byte model_revision_hash (the u16 length maximum) and a 4-byte emoji",
            lay,
            F16,
            PER_TENSOR,
            k,
            v,
            ["hashes"],
            hashes={
                "model_revision_hash": "0123456789abcdef" * 4095 + "0123456789abcde",
                "tokenizer_hash": "\U0001f600",
            },
        )
    )
    cv.add_encode(
        EncodeSpec(
            "enc-ids-max",
            "KV-IDS",
            "layer_id, chunk_id and chunk_size at int64 max",
            lay,
            F16,
            PER_TENSOR,
            k,
            v,
            ["ids"],
            meta={"layer_id": INT64_MAX, "chunk_id": INT64_MAX, "chunk_size": INT64_MAX},
        )
    )
    cv.add_encode(
        EncodeSpec(
            "enc-ids-zero",
            "KV-IDS",
            "layer_id and chunk_id 0, chunk_size 1",
            lay,
            BF16,
            PER_LAYER_HEAD,
            k.to(BF16),
            v.to(BF16),
            ["ids"],
            meta={"layer_id": 0, "chunk_id": 0, "chunk_size": 1},
        )
    )
    cv.add_encode(
        EncodeSpec(
            "enc-geometry-unset",
            "KV-GEOMETRY",
            "every id and geometry field -1 (unset): decode returns flat tensors",
            Layout("flat-2x4x2x8", [2, 4, 2, 8], -2, None, "", []),
            F16,
            PER_TENSOR,
            k,
            v,
            ["ids", "logical-shape"],
            meta={"kv_head_count": -1, "head_dim": -1},
        )
    )
    cv.add_encode(
        EncodeSpec(
            "enc-geometry-unset-per_layer_head",
            "KV-GEOMETRY",
            "PER_LAYER_HEAD without head_dim: V can be read as FP8 but not dequantized "
            "(no head axis is known)",
            Layout("flat-2x4x2x8", [2, 4, 2, 8], -2, None, "", []),
            F16,
            PER_LAYER_HEAD,
            k,
            v,
            ["ids"],
            meta={"kv_head_count": -1, "head_dim": -1},
        )
    )


def axis_extents(cv: CodecVectors) -> None:
    """PER_PAGE_HEAD with the head axis before the page axis and different extents (2 heads,
    3 pages): the (pages, heads) scales must be paired with their groups however V's axes
    are ordered. Upstream 0.5.6 views the scales in V's axis order and, with unequal
    extents, crashes in encode (SPEC "Differences", item 6); the 2x2 layout of the matrix
    only showed the silent mispairing."""
    lay = Layout("hptd-2x3x4x8", [2, 3, 4, 8], 0, 1, "HPTD", ["foreign-layout"])
    k, v = _kv(4242, F16, lay.shape)
    cv.add_encode(
        EncodeSpec(
            "enc-per_page_head-f16-hptd-2x3x4x8",
            "Q-SCALE",
            "per_page_head scales, float16 K/V of shape [2, 3, 4, 8] (heads, pages, tokens, "
            "dim): head_axis 0 before page_axis 1, 2 heads but 3 pages",
            lay,
            F16,
            PER_PAGE_HEAD,
            k,
            v,
        )
    )


def refusals(cv: CodecVectors) -> None:
    """Encode requests a writer must refuse rather than write a blob readers reject."""
    base = "enc-per_page_head-f16-nhd-2x4x2x8"
    cases: list[tuple[str, str, str, dict[str, Any]]] = [
        (
            "k-float32",
            "KV-K-DTYPE",
            "K and V given as float32",
            {"dtype": "float32", "shape": [2, 4, 2, 4], "head_dim": 4},
        ),
        (
            "no-page-axis",
            "KV-ENCODE-REFUSE",
            "PER_PAGE_HEAD without a page axis",
            {"page_axis": None},
        ),
        (
            "page-axis-is-head-axis",
            "KV-ENCODE-REFUSE",
            "page_axis equal to head_axis (2)",
            {"page_axis": 2, "head_axis": 2},
        ),
        (
            "external-no-scales",
            "Q-EXTERNAL",
            "EXTERNAL scope without caller scales",
            {"scale_scope": 3, "page_axis": None},
        ),
        (
            "heads-disagree",
            "KV-ENCODE-REFUSE",
            "kv_head_count 3 for a tensor with 2 heads",
            {"kv_head_count": 3},
        ),
        (
            "page-size-disagree",
            "KV-ENCODE-REFUSE",
            "page_size 3 for pages of 4 tokens",
            {"page_size": 3},
        ),
        ("layer-id-minus-5", "KV-IDS", "layer_id -5", {"layer_id": -5}),
        ("layer-id-overflow", "KV-IDS", "layer_id 2^63 does not fit int64", {"layer_id": 2**63}),
        (
            "hash-too-long",
            "KV-HASHES",
            "model_id of 65536 bytes (the u16 length maximum is 65535)",
            {"model_id": "m" * 65536},
        ),
        (
            "scale-dtype-uint8",
            "KV-SCALE-DTYPE",
            "scales requested as uint8",
            {"scale_dtype": "uint8"},
        ),
    ]
    for name, rule, comment, changes in cases:
        cv.add_refusal(f"{rule.lower()}-encode-{name}", rule, comment, base, changes)
    cv.add_refusal(
        "kv-encode-refuse-scale-shape-9-dims",
        "KV-ENCODE-REFUSE",
        "PER_TENSOR static scale 1.0 given with shape (1,) x 9: the blob would declare "
        "scale_shape_n 9 (and a scale shape PER_TENSOR does not allow), which readers "
        "reject (KV-SCALE-SHAPE-N); upstream writes it and its own reader refuses it",
        "enc-per_tensor-f16-nhd-2x4x2x8",
        {},
        v_scales=torch.ones([1] * 9, dtype=torch.float32),
    )
    cv.add_refusal(
        "kv-encode-refuse-static-scales-shape",
        "KV-ENCODE-REFUSE",
        "PER_LAYER_HEAD static scales of shape (3,) for 2 heads",
        base,
        {"scale_scope": 1, "page_axis": None},
        v_scales=torch.ones(3, dtype=torch.float32),
    )


def build(cv: CodecVectors) -> None:
    """All encode vectors, in a fixed order."""
    encode_matrix(cv)
    axis_extents(cv)
    special_values(cv)
    metadata(cv)
    refusals(cv)
