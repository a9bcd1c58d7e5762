"""What ``lmckv bench e2e --model DIR`` loads from a model folder: never code the folder
brings (``auto_map``, Python files), never a question on stdin, only the safetensors whose
headers gave the parameter count (other weight formats, extra or unlisted safetensors, a
config that describes another model, a header that lies about its tensors are refused), and
the parameter count of the loaded model is the count the memory check used. Each refusal is
one line (``ModelUnusable``; exit 2 on the command line). Tiny random Llamas built here,
offline."""

from __future__ import annotations

import builtins
import importlib
import json
import os
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lmckv.bench.accuracy import model_folder, models
from lmckv.bench.accuracy.models import ModelUnusable

REQUIRE_REAL_KV = "LMCKV_REQUIRE_REAL_KV"
try:
    transformers = importlib.import_module("transformers")
    tokenizers = importlib.import_module("tokenizers")
    safetensors_torch = importlib.import_module("safetensors.torch")
except ImportError as exc:
    if os.environ.get(REQUIRE_REAL_KV, "") not in ("", "0"):
        pytest.fail(f"{exc}, and {REQUIRE_REAL_KV} is set", pytrace=False)
    pytest.skip(f"{exc} (pip install 'lmckv[real-kv]')", allow_module_level=True)

import torch  # noqa: E402 (after the skip: the real-kv extra brings it with transformers)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
CHARS = string.ascii_letters + string.digits + string.punctuation + " \n"


def _save(folder: Path, *, layers: int = 2, tie: bool = False) -> Path:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(CHARS) + 1,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        architectures=["LlamaForCausalLM"],
    )
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    vocab = {"[UNK]": 0, **{c: i + 1 for i, c in enumerate(CHARS)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save(tmp_path_factory.mktemp("honest"))


@pytest.fixture
def copy(honest: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(honest, tmp_path / "model"))


@pytest.fixture
def never_loaded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Calls of transformers' model and tokenizer loaders (a refused folder makes none) and a
    prompt that fails the test."""
    calls: list[Any] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        raise AssertionError("loaded")

    def no_prompt(*args: Any, **kwargs: Any) -> str:
        calls.append(("input", args))
        raise AssertionError("a prompt on stdin")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", record)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setattr(builtins, "input", no_prompt)
    return calls


def _refused(path: Path, *needles: str, **kwargs: Any) -> str:
    with pytest.raises(ModelUnusable) as info:
        models.load(path, **kwargs)
    message = str(info.value)
    assert len(message.splitlines()) == 1, message
    for needle in needles:
        assert needle in message, message
    return message


def _edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _auto_map_folder(folder: Path, marker: Path) -> Path:
    """A folder whose config asks transformers to import its evil.py (a custom model type,
    so that no class of transformers' own stands in): the import writes ``marker``."""
    _edit_json(
        folder / "config.json",
        model_type="evil-llama",
        auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"},
    )
    (folder / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "class EvilConfig(LlamaConfig):\n    model_type = 'evil-llama'\n"
        "class EvilModel(LlamaForCausalLM):\n    config_class = EvilConfig\n"
    )
    return folder


# --- code the folder brings ----------------------------------------------------------------


def test_an_auto_map_folder_is_refused_and_its_code_never_runs(
    copy: Path, tmp_path: Path, never_loaded: list[Any]
) -> None:
    marker = tmp_path / "MARKER"
    _refused(_auto_map_folder(copy, marker), "config.json has auto_map")
    assert not marker.exists() and not never_loaded


def test_the_command_refuses_it_in_one_line_whatever_stdin_answers(
    copy: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    folder = _auto_map_folder(copy, marker)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    argv = [sys.executable, "-m", "lmckv", "bench", "e2e", "--model", str(folder)]
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "out"), "--no-progress"],
        input=b"y\n" * 1000,
        capture_output=True,
        timeout=240,
        cwd=REPO,
        env=env,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and "[y/N]" not in err + done.stdout.decode()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "auto_map" in lines[0], err
    assert not marker.exists()
    assert not list((tmp_path / "out").glob("*.jsonl")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize(
    ("name", "changes"),
    [
        ("tokenizer_config.json", {"auto_map": {"AutoTokenizer": ["tok.Tok", None]}}),
        ("config.json", {"text_config": {"auto_map": {"AutoConfig": "evil.C"}}}),
        ("config.json", {"custom_pipelines": {"x": {"impl": "evil.Pipe"}}}),
        ("generation_config.json", {"auto_map": {"AutoConfig": "evil.C"}}),
    ],
)
def test_every_code_reference_in_its_json_is_refused(
    copy: Path, never_loaded: list[Any], name: str, changes: dict[str, Any]
) -> None:
    _edit_json(copy / name, **changes)
    key = next(iter(k for k in model_folder.CODE_KEYS if k in json.dumps(changes)))
    _refused(copy, name, key)
    assert not never_loaded


@pytest.mark.parametrize("relative", ["helper.py", "sub/cached.pyc"])
def test_python_files_without_auto_map_are_refused(
    copy: Path, never_loaded: list[Any], relative: str
) -> None:
    (copy / relative).parent.mkdir(exist_ok=True)
    (copy / relative).write_text("raise SystemExit('ran')\n")
    _refused(copy, "holds Python code", relative)
    assert not never_loaded


def test_stdin_reads_empty_while_a_model_loads() -> None:
    with models._no_stdin(), pytest.raises(EOFError):
        input("Do you wish to run the custom code? [y/N] ")


# --- only the weights that were checked ----------------------------------------------------


def test_a_decoy_safetensors_beside_a_pickle_is_refused_and_nothing_loads(
    honest: Path, tmp_path: Path, never_loaded: list[Any]
) -> None:
    folder = Path(shutil.copytree(honest, tmp_path / "decoy"))
    state = safetensors_torch.load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    safetensors_torch.save_file({"x": torch.zeros(1)}, str(folder / "decoy.safetensors"))
    _refused(folder, "pytorch_model.bin", "other than safetensors", memory_limit=2**40)
    assert not never_loaded


@pytest.mark.parametrize(
    "layout",
    ["extra_safetensors", "only_decoy", "bin_beside", "training_args", "index_unlisted",
     "index_outside", "both", "adapter", "redirect"],
)  # fmt: skip
def test_weights_other_than_the_checked_ones_are_refused(
    copy: Path, never_loaded: list[Any], layout: str
) -> None:
    decoy = {"x": torch.zeros(1)}
    if layout in ("extra_safetensors", "only_decoy"):
        safetensors_torch.save_file(decoy, str(copy / "decoy.safetensors"))
        if layout == "only_decoy":
            (copy / "model.safetensors").unlink()
        needle = "decoy.safetensors"
    elif layout in ("bin_beside", "training_args"):
        name = "pytorch_model.bin" if layout == "bin_beside" else "training_args.bin"
        (copy / name).write_bytes(b"\x80\x04N.")
        needle = name
    elif layout.startswith("index"):
        (copy / "model.safetensors").rename(copy / "model-00001-of-00001.safetensors")
        state = safetensors_torch.load_file(str(copy / "model-00001-of-00001.safetensors"))
        target = "model-00001-of-00001.safetensors" if layout == "index_unlisted" else "../x"
        index = {"weight_map": {k: target for k in state}}
        (copy / "model.safetensors.index.json").write_text(json.dumps(index))
        safetensors_torch.save_file(decoy, str(copy / "decoy.safetensors"))
        needle = "decoy.safetensors" if layout == "index_unlisted" else "../x"
    elif layout == "both":
        (copy / "model.safetensors.index.json").write_text('{"weight_map": {}}')
        needle = "both"
    elif layout == "adapter":
        (copy / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
        needle = "PEFT adapter"
    else:
        _edit_json(copy / "config.json", transformers_weights="other.safetensors")
        needle = "transformers_weights"
    _refused(copy, needle)
    assert not never_loaded


@pytest.mark.parametrize("tie", [False, True])
def test_an_honest_folder_loads_and_holds_the_parameters_its_headers_list(
    tmp_path: Path, tie: bool
) -> None:
    folder = _save(tmp_path / "m", tie=tie)
    header = model_folder.safetensors_params([folder / "model.safetensors"])[0]
    loaded = models.load(folder)
    unique = {id(p): p for p in loaded.model.parameters()}
    assert loaded.identity["parameters"] == header == sum(p.numel() for p in unique.values())
    assert loaded.identity["source"] == "safetensors" and loaded.identity["layers"] == 2


@pytest.mark.parametrize("layers", [3, 1])
def test_a_config_describing_another_model_than_its_weights_is_refused_before_loading(
    copy: Path, never_loaded: list[Any], layers: int
) -> None:
    # 3 layers: transformers would make the third up at random (and allocate it); 1: it would
    # leave the second unused. Either way the memory check would not be of what is loaded.
    _edit_json(copy / "config.json", num_hidden_layers=layers)
    _refused(copy, "config.json describes a model of", "safetensors headers")
    assert not never_loaded


def test_a_load_that_leaves_weights_missing_or_counts_otherwise_is_refused(honest: Path) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        honest, local_files_only=True, trust_remote_code=False, use_safetensors=True
    )
    count = model_folder.tensor_count(model)
    clean = {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set()}
    model_folder.check_loading({**clean, "error_msgs": []}, model, count)
    with pytest.raises(ModelUnusable, match="weights the files lack"):
        model_folder.check_loading({**clean, "missing_keys": {"lm_head.weight"}}, model, count)
    with pytest.raises(ModelUnusable, match="the wrong shape"):
        mismatched = {("lm_head.weight", (1,), (2,))}
        model_folder.check_loading({**clean, "mismatched_keys": mismatched}, model, count)
    with pytest.raises(ModelUnusable, match="safetensors headers 1"):
        model_folder.check_loading(clean, model, 1)


# --- the safetensors header is untrusted ---------------------------------------------------


def _raw(path: Path, header: bytes, data: bytes = b"", length: int | None = None) -> Path:
    size = len(header) if length is None else length
    path.write_bytes(size.to_bytes(8, "little") + header + data)
    return path


def _entry(shape: list[Any], offsets: list[Any], dtype: Any = "F32") -> bytes:
    return json.dumps({"w": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}).encode()


@pytest.mark.parametrize(
    ("header", "data", "length", "needle"),
    [
        (_entry([1], [0, 4000]), b"\0" * 4000, None, "spans 4000 bytes"),  # a lying shape
        (_entry([10], [0, 40]), b"\0" * 4000, None, "cover 40 bytes"),  # data left over
        (_entry([10], [0, 40]), b"\0" * 20, None, "cover 40 bytes"),  # data missing
        (_entry([-1], [0, 0]), b"", None, "malformed"),
        (_entry([True], [0, 4]), b"\0" * 4, None, "malformed"),
        (_entry([1], [0, 1], "F4"), b"\0", None, "dtype"),
        (_entry([1], [0, 4], ["F32"]), b"\0" * 4, None, "dtype"),  # unhashable: no TypeError
        (_entry([1], [0, 4], {"F32": 4}), b"\0" * 4, None, "dtype"),
        (b"{not json", b"", None, "not JSON"),
        (b"[" * 200_000 + b"]" * 200_000, b"", None, "not JSON"),
        (b"[1, 2]", b"", None, "not a JSON object"),
        (b"{}", b"", 1000, "in a 10-byte file"),  # a length past the file's end
        (b"{}", b"", 2**63, "header of"),  # a length past any bound
    ],
)
def test_a_header_is_read_only_as_the_safetensors_library_would_accept_it(
    tmp_path: Path, header: bytes, data: bytes, length: int | None, needle: str
) -> None:
    path = _raw(tmp_path / "model.safetensors", header, data, length)
    with pytest.raises(ModelUnusable, match=needle):
        model_folder.read_header(path)


def test_a_folder_whose_header_lies_about_its_tensors_is_refused(
    copy: Path, never_loaded: list[Any]
) -> None:
    state = safetensors_torch.load_file(str(copy / "model.safetensors"))
    blob = b"".join(t.contiguous().numpy().tobytes() for t in state.values())
    header = {k: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]} for k in list(state)[:1]}
    _raw(copy / "model.safetensors", json.dumps(header).encode(), blob)
    _refused(copy, "model.safetensors", memory_limit=2**40)
    assert not never_loaded


def test_a_short_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\1\0")
    with pytest.raises(ModelUnusable, match="too short"):
        model_folder.read_header(tmp_path / "model.safetensors")


# --- GGUF -----------------------------------------------------------------------------------


def test_a_gguf_file_is_loaded_without_remote_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = pytest.importorskip("gguf")

    class Reader:
        def __init__(self, path: str) -> None:
            self.tensors: list[Any] = []
            self.fields: dict[str, Any] = {}

    seen: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", record)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    _refused(path, "cannot load", "stop here")
    assert seen and seen[0]["trust_remote_code"] is False and seen[0]["local_files_only"]
    # transformers reads the tokenizer configuration of the file's folder: no code there either
    seen.clear()
    (tmp_path / "tokenizer_config.json").write_text('{"auto_map": {"AutoTokenizer": ["t.T"]}}')
    _refused(path, "tokenizer_config.json has auto_map")
    assert not seen
    # other JSON beside it is none of the model's business
    (tmp_path / "tokenizer_config.json").unlink()
    (tmp_path / "notes.json").write_text("{not json")
    _refused(path, "cannot load", "stop here")
