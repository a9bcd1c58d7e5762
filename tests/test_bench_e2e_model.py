"""``lmckv bench e2e --model``: a tiny random Llama built here (2 layers, hidden 64, 2 KV
heads, a character-level tokenizer) is measured end to end offline; every row of the
results file is checked against the schema; models it cannot run are one line and exit 2."""

from __future__ import annotations

import importlib
import json
import os
import string
import subprocess
import sys
from pathlib import Path

import pytest

from lmckv.bench.accuracy import l2_serdes as serdes
from lmckv.bench.bench_command import main
from lmckv.bench.common.rows import load, validate_record

#: Set by ``nox -s tests`` (which installs the ``real-kv`` extra): without transformers these
#: tests then fail instead of skipping, so CI cannot go green without running them.
REQUIRE_REAL_KV = "LMCKV_REQUIRE_REAL_KV"

try:
    transformers = importlib.import_module("transformers")
    tokenizers = importlib.import_module("tokenizers")
except ImportError as exc:
    if os.environ.get(REQUIRE_REAL_KV, "") not in ("", "0"):
        pytest.fail(f"{exc}, and {REQUIRE_REAL_KV} is set", pytrace=False)
    pytest.skip(f"{exc} (pip install 'lmckv[real-kv]')", allow_module_level=True)

CHARS = string.ascii_letters + string.digits + string.punctuation + " \n"


def _tokenizer() -> object:
    vocab = {"[UNK]": 0, **{c: i + 1 for i, c in enumerate(CHARS)}}
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def _save(folder: Path, architecture: str = "LlamaForCausalLM") -> Path:
    import torch

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(CHARS) + 1,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        architectures=[architecture],
    )
    model = (
        transformers.LlamaForCausalLM(config)
        if architecture.endswith("ForCausalLM")
        else transformers.LlamaModel(config)
    )
    model.save_pretrained(folder)
    _tokenizer().save_pretrained(folder)  # type: ignore[attr-defined]
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save(tmp_path_factory.mktemp("tiny-llama"))


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()  # what building the model printed
    code = main(["e2e", *args, "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_tiny_llama_runs_end_to_end(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["--model", str(tiny), "--context", "64", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    (path,) = tmp_path.glob("bench-*.jsonl")
    header, records = load(path)
    for line in path.read_text().splitlines():
        validate_record(json.loads(line))  # every row, the header included
    model = header["model"]
    assert (model["layers"], model["kv_heads"], model["head_dim"]) == (2, 2, 16)
    assert model["source"] == "safetensors" and model["dtype"] == "F32"
    assert len(model["revision"]) == 16
    rows = [r for r in records if r["kind"] == "e2e"]
    assert {r["context"] for r in rows if "context" in r} == {64}
    scored = {(r["serde"], r["cache_dtype"]) for r in rows if r["metric"] == "kl"}
    for dtype in ("float16", "bfloat16"):
        for serde in (serdes.FP8, serdes.K16V8, serdes.K16V8_V_ONLY):
            assert (serde, dtype) in scored
    kl = {
        (r["serde"], r["scope"], r["cache_dtype"]): r["value"]
        for r in rows
        if r["metric"] == "kl" and r["serde"]
    }
    # the V-only serde stores the same V: the same figures as storage-only
    assert kl[(serdes.K16V8_V_ONLY, "PER_TENSOR", "float16")] == pytest.approx(
        kl[(serdes.K16V8, "PER_TENSOR", "float16")]
    )
    assert all(value >= 0.0 for value in kl.values())
    size = {
        (r["serde"], r["scope"], r["cache_dtype"]): r["value"]
        for r in rows
        if r["metric"] == "l2_bytes_per_token"
    }
    none = size[(serdes.NONE, "NONE", "float16")]
    assert none == 2 * 2 * 2 * 16 * 2  # K and V, 2 layers x 2 heads x 16 dims, 2 bytes
    assert size[(serdes.FP8, serdes.NO_SCALE, "float16")] == none / 2
    storage = size[(serdes.K16V8, "PER_TENSOR", "float16")]
    v_only = size[(serdes.K16V8_V_ONLY, "PER_TENSOR", "float16")]
    assert none * 0.75 < storage < none and v_only < storage - none / 2 * 0.9


def test_a_model_it_cannot_run_is_one_line_and_exit_2(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder = _save(tmp_path / "encoder", "LlamaModel")
    code, _, err = _run(["--model", str(encoder), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "not a causal LM" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = _run(
        ["--model", str(tiny), "--memory-limit", "1000", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "too large for memory" in err and "GiB available" in err
    code, _, err = _run(["--model", str(tmp_path / "absent.gguf"), "--out", str(tmp_path)], capsys)
    assert code == 2 and "no such file" in err
    code, _, err = _run(
        ["--model", str(tiny), "--context", "480", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "exceed the model's 512 positions" in err
    short = tmp_path / "short.txt"
    short.write_text("Too little text for four windows.", encoding="utf-8")
    code, _, err = _run(
        ["--model", str(tiny), "--text", str(short), "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "the text gives 33 tokens" in err
    assert not list((tmp_path / "o").glob("*.jsonl"))  # nothing written for a refused model


def test_a_lossy_plugin_serde_is_scored_through_the_model(tiny: Path, tmp_path: Path) -> None:
    """``--serde-plugin``: a lossy serde a plugin registers (tests/lossy_serde_plugin.py) gets
    the rows fp8 gets, kl, top-1 and perplexity change with their intervals and its bytes per
    token, in both cache dtypes, measured through LMCache's factory. Run as a command of its
    own: the plugin's registration stays in that process."""
    pytest.importorskip("lmcache.v1.distributed.serde")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "LMCKV_SERDE_PLUGINS": ""}
    argv = [
        sys.executable, "-m", "lmckv", "bench", "e2e", "--model", str(tiny), "--context", "64",
        "--out", str(tmp_path), "--no-progress", "--serde-plugin", "lossy_serde_plugin:register",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.glob("bench-*.jsonl")
    records = load(path)[1]
    rows = [r for r in records if r.get("serde") == "lmckv_test_mantissa"]
    by = {(r["metric"], r["cache_dtype"]): r for r in rows}
    for dtype in ("float16", "bfloat16"):
        kl = by[("kl", dtype)]
        assert kl["value"] > 0 and kl["ci_low"] <= kl["value"] <= kl["ci_high"]
        assert by[("top1", dtype)]["value"] <= 1.0
        assert by[("ppl_change", dtype)]["ci_low"] is not None
        assert by[("l2_bytes_per_token", dtype)]["value"] == 2 * 2 * 2 * 16 * 2
    assert not [r for r in records if r["kind"] == "skip" and "mantissa" in r["what"]]
