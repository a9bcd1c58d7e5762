"""``upstream``: LMCache's own Python modules (the installed release) driven like the reference.

Every release from 0.5.3 on works: a module that moved between releases is found where the
installed release keeps it (:data:`PROTOCOL_MODULES`: 0.5.7rc2 moved RemoteMetadata and the
shape helpers to ``lmcache.inprocess.v1.protocol``), and an API a release removed (0.5.7rc2
has no ClientMetaMessage, ServerMetaMessage, ClientCommand, ServerReturnCode) leaves its
operations undeclared, so their tests skip naming the missing class.

Upstream has no error classes of its own for protocol messages and keys: it raises ValueError
(documented for invalid keys), struct.error, KeyError, AssertionError, UnicodeDecodeError and
others. None of them is typed: each is reported as ``raw:<module>.<class>`` (a ValueError is
``raw:builtins.ValueError``), and PROTO-TYPED-ERRORS / KEY-TYPED-ERRORS tests that expect a
typed rejection fail on it; the known-failure lists say so test by test.

The codec and protocol modules already have the reference's names. The key forms live in
the public ``fs_key_codec`` module of newer releases and in private helpers of the L2
adapters in 0.5.x (:data:`KEY_FORM_FUNCTIONS`: the public one first, the private one as an
explicit fallback), gathered here into one ``keys`` namespace with the descriptors of
``lmcache.v1.distributed.api``; a release that has none of a form's places (a private
helper that moved) does not declare its operations, and their tests skip naming it.
Upstream's AttnWindowDesc has no ``required_chunks``, so upstream does not declare
``key.window.hit`` (KEY-WINDOW-HIT). The S3 adapter imports ``awscrt`` at module level only
for its transport; when ``awscrt`` is not installed a placeholder module stands in for it,
because the key helpers never touch it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import sys
import types
import warnings

from lmckv.base.lmcache_release import installed_version

from .python_driver import PythonDriver


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
    """Module ``__getattr__`` of the awscrt stand-in: any public name is an empty class.
    Dunder names (``__file__``, ``__path__``, ...) stay missing, as on any module: tools
    that walk ``sys.modules`` (hypothesis collects constants from every module's file)
    must not be handed a class for a path."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    return type(name, (), {})


def _quiet_lmcache_logging() -> None:
    for name in ("lmcache", "LMCache"):
        logging.getLogger(name).setLevel(logging.WARNING)


#: Where the protocol's names live, first match wins: the message module of every release,
#: the in-process protocol that 0.5.7rc2 moved RemoteMetadata and the shape helpers to, and
#: the modules that define the key classes and MemoryFormat (which older releases re-export
#: from ``lmcache.v1.protocol``).
PROTOCOL_MODULES = (
    "lmcache.v1.protocol",
    "lmcache.inprocess.v1.protocol",
    "lmcache.utils",
    "lmcache.v1.memory_management",
)
#: The protocol names the driver uses (python_driver.REQUIRED_NAMES and the operations).
PROTOCOL_NAMES = (
    "ClientMetaMessage",
    "ClientCommand",
    "ServerMetaMessage",
    "ServerReturnCode",
    "MemoryFormat",
    "RemoteMetadata",
    "init_remote_metadata_info",
    "get_remote_metadata_bytes",
    "pad_shape_to_4d",
    "strip_shape_padding",
    "MAX_KEY_LENGTH",
    "CacheEngineKey",
    "LayerCacheEngineKey",
    "parse_cache_key",
    "DTYPE_TO_INT",
    "INT_TO_DTYPE",
)


def _optional_module(name: str) -> types.ModuleType | None:
    """The module, or None when this release does not have it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def _protocol_namespace() -> types.SimpleNamespace:
    """The protocol names the installed release has, each from the first module that
    defines it; a name no module has is absent (its operations are undeclared)."""
    modules = [m for m in map(_optional_module, PROTOCOL_MODULES) if m is not None]
    found: dict[str, object] = {}
    for module in modules:
        for name in PROTOCOL_NAMES:
            if name not in found and hasattr(module, name):
                found[name] = getattr(module, name)
    return types.SimpleNamespace(**found)


#: Where each release keeps a key form's writer and reader, first match wins: the public
#: module of newer releases (``fs_key_codec``), then the adapters' private helpers that 0.5.x
#: ships. A release that has none of them does not declare the form's operations.
KEY_FORM_FUNCTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "object_key_to_filename": (
        ("lmcache.v1.distributed.l2_adapters.fs_key_codec", "object_key_to_filename"),
        ("lmcache.v1.distributed.l2_adapters.fs_l2_adapter", "_object_key_to_filename"),
    ),
    "filename_to_object_key": (
        ("lmcache.v1.distributed.l2_adapters.fs_key_codec", "filename_to_object_key"),
        ("lmcache.v1.distributed.l2_adapters.fs_l2_adapter", "_filename_to_object_key"),
    ),
    "object_key_to_string": (
        ("lmcache.v1.distributed.l2_adapters.s3_l2_adapter", "_object_key_to_string"),
        ("lmcache.v1.distributed.l2_adapters.native_connector_l2_adapter", "_object_key_to_string"),
    ),
    "string_to_object_key": (
        ("lmcache.v1.distributed.l2_adapters.s3_l2_adapter", "_string_to_object_key"),
        ("lmcache.v1.distributed.l2_adapters.native_connector_l2_adapter", "_string_to_object_key"),
    ),
}
#: The descriptors the key operations use, all in ``lmcache.v1.distributed.api``.
API_NAMES = (
    "ObjectKey",
    "EncodedObjectKey",
    "ipc_key_to_object_keys",
    "AttnWindowDesc",
    "MemoryLayoutDesc",
)
API_MODULE = "lmcache.v1.distributed.api"


def _find_function(places: tuple[tuple[str, str], ...]) -> object | None:
    """The function at the first ``(module, name)`` of ``places`` the installed release
    has, or None. A module that is absent, or fails to import for a reason of its own (a
    transport dependency), counts as not having it."""
    for module_name, name in places:
        try:
            module = _optional_module(module_name)
        except ImportError:
            continue
        if module is not None and hasattr(module, name):
            function: object = getattr(module, name)
            return function
    return None


def key_namespace() -> types.SimpleNamespace:
    """The key names the installed release has (:data:`API_NAMES` and the key forms of
    :data:`KEY_FORM_FUNCTIONS`, each from the first place that has it). A name the release
    lacks is absent, so the operations that need it are undeclared and skip naming it."""
    found: dict[str, object] = {}
    api = _optional_module(API_MODULE)
    if api is not None:
        found.update({n: getattr(api, n) for n in API_NAMES if hasattr(api, n)})
    for name, places in KEY_FORM_FUNCTIONS.items():
        function = _find_function(places)
        if function is not None:
            found[name] = function
    return types.SimpleNamespace(**found)


def load_upstream(name: str = "upstream") -> PythonDriver:
    """Import lmcache's modules and wrap them; raises ImportError when lmcache is absent.

    A module a release lacks leaves its operations undeclared (see the module docstring):
    the codec when ``lmcache.v1.kv_codec`` is absent, each key form when no place of
    :data:`KEY_FORM_FUNCTIONS` has it."""
    importlib.import_module("lmcache")
    _stub_awscrt()
    kv_codec = _optional_module("lmcache.v1.kv_codec")
    _quiet_lmcache_logging()
    # upstream's decode wraps the immutable input in torch.frombuffer and warns about it
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    version = installed_version()
    driver = PythonDriver(
        name,
        kv_codec,
        _protocol_namespace(),
        key_namespace(),
        version=version,
        label=f"lmcache {version}",
        serde=_serde_module(),
    )
    if _drives_storage_manager():
        driver.info.capabilities.append(L2_ADAPTERS)
    return driver


#: The capability of a release whose L2 adapters the suite drives (test_store_load.py): its
#: StorageManager has an API the suite's worker (conformance/store/lmcache_worker.py) calls,
#: that of 0.5.6 and later (``PrefetchTaskSpec``) or that of 0.5.3 to 0.5.5
#: (``PrefetchRequestSpec``, ``reserve_write(..., mode)``).
L2_ADAPTERS = "store.l2-adapters"
STORAGE_MANAGER = "lmcache.v1.distributed.storage_manager"
STORAGE_API = "lmcache.v1.distributed.api"
PREFETCH_SPECS = ("PrefetchTaskSpec", "PrefetchRequestSpec")


def _drives_storage_manager() -> bool:
    """Whether the installed release's StorageManager is one the worker drives."""
    if importlib.util.find_spec(STORAGE_MANAGER) is None:
        return False
    api = _optional_module(STORAGE_API)
    return api is not None and any(hasattr(api, name) for name in PREFETCH_SPECS)


#: Where releases keep the AsymK16V8 serdes (0.5.6 and 0.5.7rc2: this module; neither
#: registers them in ``serde/factory.py``, newer code does, as ``asym_k16_v8`` and
#: ``asym_k16_v8_v_only``, with the same classes).
SERDE_MODULES = ("lmcache.v1.distributed.serde.asym_k16_v8",)


def _serde_module() -> types.ModuleType | None:
    """The first module of :data:`SERDE_MODULES` the release has, or None (the serde
    operations are then undeclared, naming the missing module)."""
    return next((m for m in map(_optional_module, SERDE_MODULES) if m is not None), None)
