"""The serde rows of the benchmark (bench/throughput/serde_calls.py): the timed calls do the serde's
whole
work into preallocated buffers, each row is a valid bench row set against memcpy, and the
report's serde-cost table sets each serde row beside the codec operation it wraps."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
import torch

from lmckv.base.schemas import validate
from lmckv.bench.common.impls import load_impls
from lmckv.bench.throughput.measure import Case, ThroughputPlan, make_layers, measure, rows
from lmckv.bench.throughput.serde_calls import SERDE_OPS, SERDE_SCOPES, SerdeOps
from lmckv.reference_impl.kv_codec import AsymK16V8Codec, ScaleScope
from lmckv.reports.bench_section import serde_cost

CASE = Case("tiny", layers=2, pages=2, heads=2, head_dim=16)


@pytest.mark.parametrize("scope", SERDE_SCOPES)
def test_timed_calls_write_the_codec_blob_and_read_it_back(scope: str) -> None:
    """What is timed is the serde's whole work: wiped destinations are filled again."""
    layers = make_layers(CASE, torch.bfloat16, "cpu", seed=3)
    ops = SerdeOps("reference", ScaleScope, scope, layers)
    codec = AsymK16V8Codec(scale_scope=ScaleScope[scope])
    for op in SERDE_OPS:
        ops.prepare(op)
    for v_only in (False, True):
        for _, dst in ops.groups[v_only]:
            dst.tensor.zero_()
        ops.op("serialize_v_only" if v_only else "serialize")()
        for layer, (_, dst) in zip(layers, ops.groups[v_only], strict=True):
            k = None if v_only else layer.k
            enc = codec.encode(k, layer.v, k_dtype=layer.k.dtype)
            assert dst.tensor.numpy().tobytes() == bytes(codec.to_bytes(enc))
        for _, outs in ops.reads[v_only]:
            for slot in outs:
                if slot is not None:
                    slot.tensor.zero_()
        ops.op("deserialize_v_only" if v_only else "deserialize")()
        for layer, (blob, (k_out, v_out)) in zip(layers, ops.reads[v_only], strict=True):
            _, v, _ = codec.decode(
                codec.from_bytes(bytearray(blob.tensor.numpy().tobytes())),
                out_v_dtype=torch.bfloat16,
                shape=tuple(layer.v.shape),
                head_axis=-2,
            )
            assert torch.equal(
                v_out.tensor.view(-1).view(torch.int16), v.reshape(-1).view(torch.int16)
            )
            assert v_only or torch.equal(k_out.tensor, layer.k)
    kv = sum(layer.kv_bytes for layer in layers)
    assert ops.op_bytes("serialize") == kv and ops.op_bytes("serialize_v_only") == kv // 2
    assert ops.op_bytes("deserialize") == sum(d.tensor.numel() for _, d in ops.groups[False])


def _serde_rows(impl_names: tuple[str, ...]) -> list[dict[str, Any]]:
    impls, _ = load_impls(impl_names)
    plan = ThroughputPlan(
        cpu_cases=(CASE,),
        cuda_cases=(),
        dtypes=("float16",),
        rounds=1,
        warmup=0,
        min_sample_s=0.0005,
        devices=("cpu",),
        cpu_ops=("encode", "decode_dequant"),
        processes=1,
        serde_cases=(CASE.name,),
    )
    (result,) = measure(plan, impls, progress=False)
    return list(rows([result]))


def test_serde_rows_are_bench_rows_against_memcpy() -> None:
    out = _serde_rows(("reference",))
    skips = [r for r in out if r["kind"] == "skip"]
    assert not skips, skips
    serde = [r for r in out if r["op"] in SERDE_OPS]
    assert {(r["op"], r["scope"]) for r in serde} == {
        (op, scope) for op in SERDE_OPS for scope in SERDE_SCOPES
    }
    for row in serde:
        validate({**row, "machine_id": "0123456789abcdef"}, "bench-row")
        assert row["limit"] == "memcpy" and row["ratio_to_limit"] > 0
    layers = make_layers(CASE, torch.float16, "cpu")
    kv = sum(layer.kv_bytes for layer in layers)
    by_op = {(r["op"], r["scope"]): r["bytes"] for r in serde}
    assert by_op[("serialize", "PER_TENSOR")] == kv
    assert by_op[("serialize_v_only", "PER_TENSOR")] == kv // 2
    # a blob holds K, V in FP8 and a header: between 3/4 and all of K+V here
    assert kv * 3 // 4 < by_op[("deserialize", "PER_TENSOR")] < kv


def test_plan_round_trips_its_serde_fields() -> None:
    plan = ThroughputPlan((CASE,), (), serde_cases=(CASE.name,), serde_ops=("serialize",))
    again = ThroughputPlan.from_json(plan.to_json())
    assert again == plan and plan.describe()["serde_cases"] == [CASE.name]


def _row(op: str, impl: str, median_s: float, scope: str = "PER_TENSOR") -> dict[str, Any]:
    return {
        "machine": "m",
        "impl": impl,
        "scope": scope,
        "dtype": "float16",
        "case": "page16",
        "op": op,
        "gbps": 1.0 / median_s,
        "median_s": median_s,
        "ratio_to_limit": 0.1,
    }


def test_serde_cost_sets_each_serde_row_beside_its_codec_operation() -> None:
    frame = pd.DataFrame(
        [
            _row("encode", "reference", 1.0),
            _row("serialize", "reference", 1.5),
            _row("serialize_v_only", "reference", 0.6),
            _row("encode", "upstream", 2.0),
            _row("serialize", "upstream", 5.0),
            _row("deserialize", "upstream", 3.0),  # no decode_dequant row: no ratio
            _row("serialize", "reference", 4.0, scope="PER_LAYER_HEAD"),  # no encode twin
        ]
    )
    cost = serde_cost(frame)
    got = {(r["impl"], r["scope"], r["op"]): r["serde / codec time"] for _, r in cost.iterrows()}
    assert got[("reference", "PER_TENSOR", "serialize")] == pytest.approx(1.5)
    assert got[("reference", "PER_TENSOR", "serialize_v_only")] == pytest.approx(0.6)
    assert got[("upstream", "PER_TENSOR", "serialize")] == pytest.approx(2.5)
    assert math.isnan(got[("upstream", "PER_TENSOR", "deserialize")])
    assert math.isnan(got[("reference", "PER_LAYER_HEAD", "serialize")])
    assert len(cost) == 5
    assert serde_cost(frame[frame["op"] == "encode"]).empty
