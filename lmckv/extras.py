"""Which optional extra of the lmckv distribution provides a module, and the message when a
subcommand finds one missing."""

from __future__ import annotations

#: Top-level module name -> the extra (pyproject.toml) that installs it.
MODULE_EXTRAS = {
    "pandas": "bench",
    "matplotlib": "bench",
    "pynvml": "bench",
    "tqdm": "bench",
    "pytest": "test",
    "xdist": "test",
    "hypothesis": "test",
    "atheris": "fuzz",
    "redis": "store",
    "boto3": "store",
    "botocore": "store",
    "cryptography": "store",
    "distributed": "store",
    "triton": "kernels",
    "transformers": "real-kv",
    "gguf": "real-kv",
    "accelerate": "real-kv",
    "safetensors": "real-kv",
}


def missing_extra_message(command: str, error: ModuleNotFoundError) -> str | None:
    """The one-line message for ``error`` when an extra provides the missing module, else
    None (a missing module that no extra provides is a broken install, not a usage error)."""
    module = (error.name or "").partition(".")[0]
    extra = MODULE_EXTRAS.get(module)
    if extra is None:
        return None
    return (
        f"lmckv {command}: needs the '{extra}' extra: "
        f"pip install 'lmckv[{extra}]' (missing module {module})"
    )
