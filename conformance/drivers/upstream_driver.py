"""``upstream``: LMCache's own Python modules (lmcache 0.5.6) driven like the reference.

Upstream has no error classes of its own for protocol messages and keys and documents
ValueError for invalid keys, so a ValueError (other than a Unicode decoding error) counts as
the typed rejection of those formats; struct.error, KeyError, AssertionError, IndexError,
TypeError, RuntimeError and UnicodeDecodeError do not.

The codec and protocol modules already have the reference's names. The key forms live in
private helpers of the L2 adapters, gathered here into one ``keys`` namespace with the
descriptors of ``lmcache.v1.distributed.api``. Upstream's AttnWindowDesc has no
``required_chunks``, so upstream does not declare ``key.window.hit`` (KEY-WINDOW-HIT). The S3
adapter imports ``awscrt`` at module level only for its transport; when ``awscrt`` is not
installed a placeholder module stands in for it, because the key helpers never touch it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
import types
import warnings

from conformance.drivers.python_driver import PythonDriver


def _stub_awscrt() -> None:
    if "awscrt" in sys.modules:
        return
    try:
        importlib.import_module("awscrt")
    except ImportError:
        stub = types.ModuleType("awscrt")
        for sub in ("auth", "http", "io", "s3", "exceptions"):
            mod = types.ModuleType(f"awscrt.{sub}")
            vars(mod)["__getattr__"] = _placeholder_class
            setattr(stub, sub, mod)
            sys.modules[f"awscrt.{sub}"] = mod
        sys.modules["awscrt"] = stub


def _placeholder_class(name: str) -> type:
    """Module ``__getattr__`` of the awscrt stand-in: any name is an empty class."""
    return type(name, (), {})


def _quiet_lmcache_logging() -> None:
    for name in ("lmcache", "LMCache"):
        logging.getLogger(name).setLevel(logging.WARNING)


def load_upstream(name: str = "upstream") -> PythonDriver:
    """Import lmcache's modules and wrap them; raises ImportError when lmcache is absent."""
    _stub_awscrt()
    kv_codec = importlib.import_module("lmcache.v1.kv_codec")
    protocol_module = importlib.import_module("lmcache.v1.protocol")
    utils = importlib.import_module("lmcache.utils")
    api = importlib.import_module("lmcache.v1.distributed.api")
    fs = importlib.import_module("lmcache.v1.distributed.l2_adapters.fs_l2_adapter")
    s3 = importlib.import_module("lmcache.v1.distributed.l2_adapters.s3_l2_adapter")
    _quiet_lmcache_logging()
    # upstream's decode wraps the immutable input in torch.frombuffer and warns about it
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    # The wheel's protocol module no longer re-exports the key classes it uses.
    protocol = types.SimpleNamespace(
        **{
            **vars(protocol_module),
            "CacheEngineKey": utils.CacheEngineKey,
            "LayerCacheEngineKey": utils.LayerCacheEngineKey,
        }
    )
    keys = types.SimpleNamespace(
        ObjectKey=api.ObjectKey,
        EncodedObjectKey=api.EncodedObjectKey,
        ipc_key_to_object_keys=api.ipc_key_to_object_keys,
        object_key_to_filename=fs._object_key_to_filename,
        filename_to_object_key=fs._filename_to_object_key,
        object_key_to_string=s3._object_key_to_string,
        string_to_object_key=s3._string_to_object_key,
        AttnWindowDesc=api.AttnWindowDesc,
        MemoryLayoutDesc=api.MemoryLayoutDesc,
    )
    version = importlib.metadata.version("lmcache")
    return PythonDriver(name, kv_codec, protocol, keys, version=version, value_error_is_typed=True)
