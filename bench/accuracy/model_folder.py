"""What a model folder may hold, read before any of it is handed to transformers.

A benchmark runs no code it was handed and never asks a question on stdin. A folder is
refused (``ModelUnusable``, one line) when it references code (``auto_map`` or
``custom_pipelines`` in any of its JSON files: transformers would offer to import the folder's
Python) or holds Python files at all, when it holds weights in any format other than
safetensors (a pickle beside the safetensors is a different model from the one the headers
describe), and when its safetensors are not exactly the files transformers loads:
``model.safetensors`` alone, or the shards ``model.safetensors.index.json`` lists, and no
other ``*.safetensors``. The parameter count the memory check uses comes from those files'
headers, which are validated the way the safetensors library validates them (bounded size,
JSON, known dtypes, every tensor's byte range matching its shape, the ranges tiling the data)
so that a header cannot claim fewer parameters than its file holds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, load_path, loads

#: The safetensors library's own bound on a header (``MAX_HEADER_SIZE``).
MAX_HEADER_BYTES = 100_000_000
#: A configuration, index or tokenizer JSON file larger than this is refused unread.
MAX_JSON_BYTES = 100 * 2**20
#: What those JSON files may hold (configs may write Infinity, as Python's json does), and a
#: safetensors header (one entry per tensor; no NaN).
JSON_LIMITS = JSONLimits(max_bytes=MAX_JSON_BYTES, max_items=10_000_000, allow_nan=True)
HEADER_LIMITS = JSONLimits(max_bytes=MAX_HEADER_BYTES, max_items=10_000_000)
#: Bytes per stored weight, by the safetensors dtype name (sub-byte dtypes are refused).
ST_ITEMSIZE = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "BF16": 2,
    "F16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}
#: JSON keys by which a Hugging Face folder names Python code for transformers to import.
CODE_KEYS = ("auto_map", "custom_pipelines")
#: Python source and bytecode: a folder holding any is refused, whatever its JSON says.
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyw")
#: Weights in formats other than safetensors (pickles, TensorFlow, Flax, GGUF, NumPy...).
OTHER_WEIGHT_SUFFIXES = (
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".pkl",
    ".pickle",
    ".joblib",
    ".msgpack",
    ".h5",
    ".hdf5",
    ".keras",
    ".gguf",
    ".ggml",
    ".npy",
    ".npz",
    ".onnx",
    ".ot",
)
SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
#: The file by which transformers takes a folder for a PEFT adapter over another model.
ADAPTER_CONFIG = "adapter_config.json"
#: What transformers reads from the folder of a GGUF file (the tokenizer's configuration).
GGUF_SIDE_FILES = (
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
#: config.json keys that make transformers load weights other than the ones checked here.
WEIGHT_REDIRECT_KEYS = ("transformers_weights",)


class ModelUnusable(RuntimeError):
    """This model cannot be measured here; the message (one line) says why."""


def _names(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(items)[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def read_json(path: Path) -> Any:
    """The JSON in ``path`` within :data:`JSON_LIMITS` (lmckv/base/untrusted_json.py);
    anything else is ``ModelUnusable``."""
    try:
        return load_path(path, JSON_LIMITS, what=path.name)
    except (OSError, UntrustedJSONError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ModelUnusable(f"{path.name}: not readable JSON ({first})") from None


def _code_keys(value: Any) -> list[str]:
    """The code-naming keys anywhere in a parsed JSON value (sub-configurations included)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.extend(k for k in CODE_KEYS if k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def refuse_code_references(folder: Path, names: tuple[str, ...] | None = None) -> None:
    """Refuse a folder any of whose JSON files (``tokenizer.json`` aside: the tokenizers
    library reads it, and it names no code), or of the files ``names``, names Python code for
    transformers to import."""
    paths = sorted(folder.glob("*.json")) if names is None else [folder / n for n in names]
    for path in paths:
        if path.name == "tokenizer.json" or not path.is_file():
            continue
        keys = sorted(set(_code_keys(read_json(path))))
        if keys:
            raise ModelUnusable(
                f"{path.name} has {' and '.join(keys)}: the folder asks to run its own Python "
                "code, and a benchmark runs none (use a model transformers implements itself)"
            )


def refuse_python_files(folder: Path) -> None:
    """Refuse a folder that holds Python source or bytecode anywhere below it."""
    found: list[str] = []
    for root, _dirs, names in os.walk(folder):
        found.extend(
            str(Path(root, name).relative_to(folder))
            for name in names
            if name.lower().endswith(CODE_SUFFIXES)
        )
    if found:
        raise ModelUnusable(
            f"{folder.name} holds Python code ({_names(found)}): a benchmark runs no code it "
            "was handed; remove it (a model transformers implements itself needs none)"
        )


def safetensors_files(folder: Path) -> list[Path]:
    """The safetensors files transformers loads from ``folder``, and nothing else there:
    refuses other weight formats, extra or missing safetensors, a PEFT adapter and a
    config.json that names its own weights file."""
    files = [p for p in folder.iterdir() if p.is_file()]
    names = {p.name for p in files}
    other = [
        n
        for n in names
        if n.lower().endswith(OTHER_WEIGHT_SUFFIXES)
        or (n.lower().endswith(".index.json") and n != SAFE_INDEX)
    ]
    if other:
        raise ModelUnusable(
            f"{folder.name} holds weights other than safetensors ({_names(other)}): only "
            "safetensors are loaded, so the folder may hold no other weights"
        )
    if ADAPTER_CONFIG in names:
        raise ModelUnusable(f"{folder.name} is a PEFT adapter ({ADAPTER_CONFIG}), not a model")
    config = read_json(folder / "config.json")
    redirects = [k for k in WEIGHT_REDIRECT_KEYS if isinstance(config, dict) and k in config]
    if redirects:
        raise ModelUnusable(f"config.json names its own weights file ({redirects[0]})")
    present = sorted(n for n in names if n.endswith(".safetensors"))
    if SAFE_WEIGHTS in names:
        if SAFE_INDEX in names:
            raise ModelUnusable(f"{folder.name} holds both {SAFE_WEIGHTS} and {SAFE_INDEX}")
        extra = [n for n in present if n != SAFE_WEIGHTS]
        if extra:
            raise ModelUnusable(
                f"{folder.name} holds {_names(extra)} beside {SAFE_WEIGHTS}: the weights "
                "loaded would not be all the weights there"
            )
        return [folder / SAFE_WEIGHTS]
    if SAFE_INDEX in names:
        index = read_json(folder / SAFE_INDEX)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelUnusable(f"{SAFE_INDEX}: no weight_map")
        listed = {str(v) for v in weight_map.values()}
        bad = [v for v in listed if not v.endswith(".safetensors") or Path(v).name != v]
        if bad:
            raise ModelUnusable(f"{SAFE_INDEX} lists {_names(bad)}: not a safetensors file here")
        absent = [v for v in listed if v not in names]
        if absent:
            raise ModelUnusable(f"{SAFE_INDEX} lists {_names(absent)}, which the folder lacks")
        unlisted = [n for n in present if n not in listed]
        if unlisted:
            raise ModelUnusable(
                f"{folder.name} holds {_names(unlisted)}, which {SAFE_INDEX} does not list: "
                "the weights loaded would not be all the weights there"
            )
        return [folder / n for n in sorted(listed)]
    if present:
        raise ModelUnusable(
            f"{folder.name} holds {_names(present)} but neither {SAFE_WEIGHTS} nor {SAFE_INDEX}"
            " (the names transformers loads)"
        )
    raise ModelUnusable(f"{folder}: no .safetensors weights")


def check_folder(folder: Path) -> list[Path]:
    """Everything above, in order; the safetensors files to load."""
    refuse_code_references(folder)
    refuse_python_files(folder)
    return safetensors_files(folder)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_header(path: Path) -> dict[str, tuple[str, int]]:
    """Tensor name -> (dtype, element count) from a safetensors file's header
    (:func:`parse_header` of its first bytes; the weights are not read)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            prefix = fh.read(8)
            length = int.from_bytes(prefix, "little") if len(prefix) == 8 else 0
            head = prefix + fh.read(min(length, MAX_HEADER_BYTES))
    except OSError as exc:
        raise ModelUnusable(f"{path.name}: unreadable ({exc.strerror or exc})") from None
    return parse_header(head, size, path.name)


def parse_header(head: bytes, size: int, name: str) -> dict[str, tuple[str, int]]:
    """Tensor name -> (dtype, element count) from ``head``, the first bytes of a safetensors
    file of ``size`` bytes named ``name``, refused (``ModelUnusable``) unless it is what the
    safetensors library would accept: at most ``MAX_HEADER_BYTES`` of JSON, known dtypes,
    each tensor's byte range as long as its shape says, the ranges tiling the data to the end
    of the file."""
    path = Path(name)
    if len(head) < 8:
        raise ModelUnusable(f"{path.name}: {size} bytes, too short for safetensors")
    length = int.from_bytes(head[:8], "little")
    if length > MAX_HEADER_BYTES:
        raise ModelUnusable(f"{path.name}: safetensors header of {length} bytes")
    if 8 + length > size or len(head) < 8 + length:
        raise ModelUnusable(f"{path.name}: header of {length} bytes in a {size}-byte file")
    raw = head[8 : 8 + length]
    try:
        header = loads(raw, HEADER_LIMITS, what=f"{path.name} header")
    except UntrustedJSONError as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ModelUnusable(f"{path.name}: safetensors header is not JSON ({first})") from None
    if not isinstance(header, dict):
        raise ModelUnusable(f"{path.name}: safetensors header is not a JSON object")
    tensors: dict[str, tuple[str, int]] = {}
    ranges: list[tuple[int, int]] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise ModelUnusable(f"{path.name}: tensor {name[:80]!r} is not described")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in ST_ITEMSIZE:  # a list is not hashable
            raise ModelUnusable(f"{path.name}: tensor {name[:80]!r} of dtype {str(dtype)[:40]!r}")
        dims = [_int(d) for d in shape] if isinstance(shape, list) else [None]
        ends = [_int(o) for o in offsets] if isinstance(offsets, list) else []
        if None in dims or len(ends) != 2 or None in ends:
            raise ModelUnusable(f"{path.name}: tensor {name[:80]!r} has malformed shape or offsets")
        count = 1
        for dim in dims:
            count *= dim or 0
        begin, end = ends[0] or 0, ends[1] or 0
        if end - begin != count * ST_ITEMSIZE[str(dtype)]:
            raise ModelUnusable(
                f"{path.name}: tensor {name[:80]!r} of shape {dims} spans {end - begin} bytes"
            )
        tensors[name] = (str(dtype), count)
        ranges.append((begin, end))
    position = 0
    for begin, end in sorted(ranges):
        if begin != position:
            raise ModelUnusable(f"{path.name}: tensor byte ranges overlap or leave gaps")
        position = end
    if position != size - 8 - length:
        raise ModelUnusable(
            f"{path.name}: the tensors cover {position} bytes of its {size - 8 - length}-byte data"
        )
    return tensors


def safetensors_params(files: list[Path]) -> tuple[int, str]:
    """(parameter count, stored dtypes) from the headers of ``files`` (weights not read)."""
    count, dtypes = 0, set()
    for path in files:
        for dtype, n in read_header(path).values():
            count += n
            dtypes.add(dtype)
    return count, "+".join(sorted(dtypes)) or "unknown"


def tensor_count(model: Any) -> int:
    """Elements in the model's state (parameters and saved buffers), a tied tensor once."""
    unique = {id(t): t for t in model.state_dict(keep_vars=True).values()}
    return sum(int(t.numel()) for t in unique.values())


def check_loading(info: dict[str, Any], model: Any, expected: int) -> None:
    """Refuse a load that left weights uninitialised or unused, or whose model holds other
    than the ``expected`` parameters (the count the memory check used)."""
    for key, what in (
        ("missing_keys", "weights the files lack (transformers would make them up)"),
        ("unexpected_keys", "weights the model does not use"),
        ("mismatched_keys", "weights of the wrong shape"),
        ("error_msgs", "loading errors"),
    ):
        found = [str(k[0] if isinstance(k, tuple) else k) for k in info.get(key) or ()]
        if found:
            first = _names([f.splitlines()[0][:120] if f else f for f in found])
            raise ModelUnusable(f"{len(found)} {what}: {first}")
    loaded = tensor_count(model)
    if loaded != expected:
        raise ModelUnusable(
            f"the loaded model holds {loaded:,} parameters, its safetensors headers {expected:,}"
        )
