"""The serdes the installed LMCache registers (bench.accuracy.lmcache_serdes): the names its
factory registers, what a pasted ``--l2-adapter`` JSON builds, each serde's round trip of an
object in LMCache's layout, and the rows the end-to-end phase makes of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import import_upstream

from lmckv.bench.accuracy import e2e
from lmckv.bench.accuracy import l2_serdes as serdes
from lmckv.bench.accuracy import lmcache_serdes as lm
from lmckv.conformance.store import catalogue
from lmckv.conformance.store.lmcache_serde_calls import SerdeFailed
from lmckv.reports.inputs import load_inputs
from lmckv.reports.output import Output
from lmckv.reports.summary_section import summary_section


@pytest.fixture(scope="module")
def serde_package() -> Path:
    """The installed release's serde package folder (or a skip naming what is missing)."""
    module = import_upstream(lm.SERDE_PACKAGE)
    return Path(str(module.__file__)).parent


def _registered_in_source(package: Path) -> set[str]:
    """The names the package's modules register, read from their text (not through the
    factory under test)."""
    found = set()
    for path in package.rglob("*.py"):
        found |= set(re.findall(r'register_serde_factory\(\s*"([a-z0-9_]+)"', path.read_text()))
    return found


def test_registered_names_are_the_factory_registrations_in_the_release(
    serde_package: Path,
) -> None:
    names, source = lm.registered()
    assert set(names) == _registered_in_source(serde_package)
    assert {"fp8", "aesgcm"} <= set(names)
    assert "get_registered_serde_types" in source


def _cache(layers: int, heads: int, tokens: int, head_dim: int) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(1)
    return [
        (
            torch.randn(1, heads, tokens, head_dim, generator=g),
            torch.randn(1, heads, tokens, head_dim, generator=g),
        )
        for _ in range(layers)
    ]


def test_objects_are_lmcache_chunks_of_every_layer() -> None:
    kv = _cache(3, 2, 300, 4)
    chunks = lm.object_chunks(kv, torch.float16)
    assert [tuple(c.shape) for c in chunks] == [(2, 3, 256, 8), (2, 3, 44, 8)]
    # token 260 of layer 2, head 1, channel 3 is V[layer 2][0, 1, 260, 3]
    assert chunks[1][1, 2, 4, 1 * 4 + 3] == kv[2][1][0, 1, 260, 3].to(torch.float16)
    assert chunks[0][0, 0, 7, 2] == kv[0][0][0, 0, 7, 2].to(torch.float16)


def test_aesgcm_gives_every_bit_back_and_writes_its_frame(serde_package: Path) -> None:
    objects = lm.object_chunks(_cache(2, 3, 288, 64), torch.bfloat16)
    trips = lm.roundtrip(serdes.l2_config(catalogue.AESGCM.name) or {}, objects)
    for obj, trip in zip(objects, trips, strict=True):
        assert torch.equal(obj.view(torch.int16), trip.back.view(torch.int16))
        # the frame: 1 version byte, a 12-byte IV, the ciphertext, a 16-byte tag
        assert trip.written == obj.numel() * 2 + 1 + 12 + 16


def test_a_serde_that_cannot_run_here_says_why(serde_package: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: turboquant runs")
    if "turboquant" not in lm.registered()[0]:
        pytest.skip("this release registers no turboquant")
    objects = lm.object_chunks(_cache(6, 2, 32, 64), torch.float16)
    with pytest.raises(SerdeFailed, match=r"serialize task failed: .*CUDA"):
        lm.roundtrip(serdes.l2_config(catalogue.TURBOQUANT.name, head_dim=64) or {}, objects)


def test_pasted_specs_build_or_are_refused_with_the_release_s_reason(
    serde_package: Path,
) -> None:
    for serde in (serdes.NONE, serdes.FP8, catalogue.AESGCM.name):
        spec = lm.adapter_spec(serdes.l2_config(serde))
        assert "builds a" in lm.build_adapter(json.loads(json.dumps(spec)))
    with pytest.raises(SerdeFailed, match="Unknown serde type 'asym_k16_v8'"):
        lm.build_adapter(lm.adapter_spec(serdes.l2_config(serdes.K16V8, "PER_TENSOR")))
    with pytest.raises(SerdeFailed, match="adapter parser or factory refuses"):
        lm.build_adapter({"type": "no_such_adapter"})


def test_registered_rows_are_exact_for_aesgcm_and_a_skip_for_what_cannot_run(
    serde_package: Path,
) -> None:
    windows = [SimpleNamespace(kv=_cache(6, 2, 256, 64)) for _ in range(2)]
    rows = list(e2e._registered_rows("m", 256, SimpleNamespace(windows=windows)))  # type: ignore[arg-type]
    by = {(r.get("serde"), r.get("metric"), r.get("cache_dtype")): r for r in rows}
    plain = 2 * 6 * 256 * 2 * 64 * 2  # K and V, 6 layers, 256 tokens, 2 heads x 64, 2 bytes
    for dtype in ("float16", "bfloat16"):
        size = by[("aesgcm", "l2_bytes_per_token", dtype)]
        assert size["value"] == (plain + 29) / 256 and size["exact"] is True
        kl = by[("aesgcm", "kl", dtype)]
        assert (kl["value"], kl["ci_low"], kl["ci_high"], kl["exact"]) == (0.0, 0.0, 0.0, True)
    assert not any(r.get("serde") == "fp8" for r in rows)  # scored through the model instead
    skips = {r["serde"]: r["reason"] for r in rows if r["kind"] == "skip"}
    registered = lm.registered()[0]
    if not torch.cuda.is_available() and "turboquant" in registered:
        assert "CUDA" in skips.pop("turboquant")
    # The catalogue's rows of no release: a skip naming where the serde comes from.
    assert "LMCache pull request #4558" in skips.pop("checksum")
    if "tqai" not in registered:
        assert "--serde-plugin" in skips.pop("tqai")
    assert skips == {}


def test_the_recommended_json_builds_with_the_installed_release(
    serde_package: Path, tmp_path: Path
) -> None:
    """What the first screen tells the operator to paste, built by LMCache's own parser and
    factories (the e2e fixture is a real quick run's rows)."""
    fixtures = Path(__file__).parent / "fixtures" / "report"
    inputs = load_inputs([fixtures / "bench-cpu.jsonl", fixtures / "bench-e2e.jsonl"])
    summary_section(inputs, Output(tmp_path), {})
    chosen = json.loads((tmp_path / "summary.json").read_text())["serde_choice"]
    assert chosen, "the fixtures' rows recommend no serde"
    for choice in chosen:
        assert choice["adapter_spec"] == json.loads(choice["config"])
        assert "builds a" in lm.build_adapter(choice["adapter_spec"])
