"""Driver over a Python module triple laid out like ``reference_impl``.

``kv_codec``, ``protocol`` and ``keys`` must expose the public names of
``reference_impl`` (which are upstream LMCache's names). The driver turns each flat
operation of TESTEE.md into calls on those names and turns exceptions into canonical
error names: an exception is typed when it is an instance of an error class the three
modules define themselves; anything else is reported as ``raw:<module>.<class>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import types
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import torch

from ..core.blob_model import HASH_KEYS
from ..core.dtype_names import DtypeNameError, dtype_from_name, dtype_name
from ..core.error_names import RAW_PREFIX, op_family
from ..core.operations import (
    CAPABILITY_FLAGS,
    HEADER_GEOMETRY,
    OPERATIONS,
    reply_problem,
)
from ..core.tensor_bytes import tensor_bytes, tensor_from_bytes
from . import serde_ops
from .base import Driver, DriverError, ImplInfo

#: How the Python API names a CacheEngineKey tag in ``request_configs`` (upstream's
#: convention, which the reference follows); the key string carries the name without it.
TAG_PREFIX = "lmcache.tag."
_CODEC_NAMES = ("AsymK16V8Codec", "CodecHashes", "ScaleScope")
#: Operation or capability flag prefix -> (module, public names it needs, dotted for an
#: attribute of a public name); longest prefix wins.
REQUIRED_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "codec.": ("kv_codec", _CODEC_NAMES),
    "codec.encode_scales": ("kv_codec", (*_CODEC_NAMES, "quantize_v_fp8")),
    "codec.v2": ("kv_codec", (*_CODEC_NAMES, "CodecVersion.V2", "ScaleScheme.RAW_UNIT")),
    "proto.client.": ("protocol", ("ClientMetaMessage", "ClientCommand", "parse_cache_key")),
    "proto.server.": ("protocol", ("ServerMetaMessage", "ServerReturnCode", "MemoryFormat")),
    "proto.remote.": ("protocol", ("RemoteMetadata", "init_remote_metadata_info")),
    "key.cache.": ("protocol", ("CacheEngineKey", "LayerCacheEngineKey", "parse_cache_key")),
    "key.object.": ("keys", ("ObjectKey",)),
    "key.kv_rank": ("keys", ("ObjectKey",)),
    "key.encoded.": ("keys", ("ObjectKey", "EncodedObjectKey")),
    "key.fs.": ("keys", ("ObjectKey", "object_key_to_filename", "filename_to_object_key")),
    "key.s3.": ("keys", ("ObjectKey", "object_key_to_string", "string_to_object_key")),
    "key.ipc": ("keys", ("ipc_key_to_object_keys",)),
    "key.window": ("keys", ("AttnWindowDesc",)),
    "key.window.hit": ("keys", ("AttnWindowDesc.required_chunks",)),
    "key.layout": ("keys", ("MemoryLayoutDesc",)),
    "serde.": ("serde", serde_ops.CLASS_NAMES),
}


#: Headroom of a key operation's address space: key operations handle a few short names,
#: so an implementation that allocates by an untrusted count (an IPC fan-out list sized by
#: world_size) fails with MemoryError instead of exhausting the machine.
KEY_OP_ADDRESS_SPACE = 512 * 2**20


def _address_space() -> int | None:
    """This process's mapped address space in bytes (psutil's ``memory_info().vms``, what
    RLIMIT_AS limits), else None where unreadable."""
    try:
        return int(psutil.Process().memory_info().vms)
    except (psutil.Error, OSError):
        return None


@contextlib.contextmanager
def _address_space_cap(headroom: int) -> Iterator[None]:
    """Lower the soft RLIMIT_AS to the current address space plus ``headroom`` while the
    body runs, then restore it. Nothing changes where the limit cannot be read (not
    Linux) or an existing limit is already lower."""
    try:
        import resource
    except ImportError:
        yield
        return
    used = _address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = None if used is None else used + headroom
    unlimited = resource.RLIM_INFINITY
    if cap is None or (soft != unlimited and soft <= cap) or (hard != unlimited and hard < cap):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class _Rejected(Exception):
    """A key reader returned None, its documented way to reject a name."""


def _provides(module: Any, dotted: str) -> bool:
    """Whether ``module`` has the public name ``dotted`` (``Class.method`` for a method)."""
    value = module
    for part in dotted.split("."):
        if not hasattr(value, part):
            return False
        value = getattr(value, part)
    return True


def _own_error_classes(modules: list[types.ModuleType]) -> list[tuple[type, str]]:
    """The exception classes the modules export (``__all__``, else public names), most
    derived first: these are the implementation's typed errors."""
    found: dict[type, str] = {}
    for module in modules:
        names = getattr(module, "__all__", None) or [n for n in vars(module) if n[:1] != "_"]
        for name in names:
            value = getattr(module, name, None)
            if (
                isinstance(value, type)
                and issubclass(value, Exception)
                and value.__module__ != "builtins"
            ):
                found[value] = value.__name__
    return sorted(found.items(), key=lambda item: -len(item[0].__mro__))


def _accepts_kwarg(func: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class PythonDriver(Driver):
    """Drives ``kv_codec``/``protocol``/``keys`` modules in this process."""

    def __init__(
        self,
        name: str,
        kv_codec: Any,
        protocol: Any,
        keys: Any,
        *,
        kind: str = "python",
        version: str | None = None,
        label: str | None = None,
        serde: Any = None,
    ) -> None:
        self.kv_codec = kv_codec
        self.protocol = protocol
        self.keys = keys
        #: The serde classes (upstream's names), or None: no serde operations.
        self.serde = serde
        modules = [m for m in (kv_codec, protocol, keys, serde) if isinstance(m, types.ModuleType)]
        self.error_classes = _own_error_classes(modules)
        #: How skip reasons name the implementation ("lmcache 0.5.7rc2"); default its name.
        self.label = label or name
        self.info = ImplInfo(name, kind, version, self._probe_capabilities())

    # -- plumbing -------------------------------------------------------------------------

    def _probe_capabilities(self) -> list[str]:
        """Every operation and flag whose public names the three modules provide."""
        return [op for op in (*OPERATIONS, *CAPABILITY_FLAGS) if not self._missing_names(op)]

    def _missing_names(self, op: str) -> list[str]:
        """The public names ``op`` needs that the implementation's modules lack."""
        prefix = max((p for p in REQUIRED_NAMES if op.startswith(p)), key=len)
        module_name, names = REQUIRED_NAMES[prefix]
        module = getattr(self, module_name)
        if module is None:
            return [f"{module_name} module"]
        return [n for n in names if not _provides(module, n)]

    def unsupported_reason(self, capability: str) -> str:
        """``upstream does not declare capability proto.client.read: lmcache 0.5.7rc2 has
        no ClientMetaMessage``: the first public name the capability needs that is missing."""
        base = super().unsupported_reason(capability)
        known = capability in OPERATIONS or capability in CAPABILITY_FLAGS
        missing = self._missing_names(capability) if known else []
        return f"{base}: {self.label} has no {missing[0]}" if missing else base

    def classify(self, exc: BaseException, op: str) -> str:
        """The canonical error name for ``exc`` raised by ``op`` (TESTEE.md, "Errors").

        Only the implementation's own exception classes are typed. A builtin or library
        exception (ValueError, KeyError, struct.error, AssertionError, UnicodeDecodeError,
        ...) is ``raw:<module>.<class>`` whatever the operation: no driver maps an exception
        to an error family by its type alone.
        """
        if isinstance(exc, _Rejected):
            return "MalformedObjectKeyStringError"
        if isinstance(exc, DtypeNameError):
            return op_family(op) or "UnsupportedConfigError"
        for cls, name in self.error_classes:
            if isinstance(exc, cls):
                return name
        if op.startswith("serde.") and self._serde_contract_error(exc):
            return "SerdeError"
        return f"{RAW_PREFIX}{type(exc).__module__}.{type(exc).__qualname__}"

    def _serde_contract_error(self, exc: BaseException) -> bool:
        """A plain ValueError raised by the serde module's own code: the refusal LMCache's
        serde contract prescribes (``multi.py``: "MUST raise ValueError"), typed as
        SerdeError. A ValueError from deeper down (torch, the codec) stays raw."""
        if type(exc) is not ValueError or exc.__traceback__ is None:
            return False
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        modules = {getattr(self.serde, n).__module__ for n in serde_ops.CLASS_NAMES}
        return tb.tb_frame.f_globals.get("__name__") in modules

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        method = self._operations().get(op)
        if method is None or op not in self.info.capabilities:
            return {"ok": False, "error": "UnsupportedOperation", "message": op}
        guard = (
            _address_space_cap(KEY_OP_ADDRESS_SPACE)
            if op.startswith("key.")
            else contextlib.nullcontext()
        )
        try:
            with guard:
                result = method(**fields)
        except serde_ops.Refused as refused:
            exc = refused.cause
            return {
                "ok": False,
                "error": self.classify(exc, op),
                "message": str(exc)[:500],
                **refused.state,
            }
        except Exception as exc:
            return {"ok": False, "error": self.classify(exc, op), "message": str(exc)[:500]}
        reply = {"ok": True, **result}
        problem = reply_problem(op, reply)
        if problem is not None:  # the driver broke the operations table: a harness failure
            raise DriverError(f"{self.name}: {problem}")
        return reply

    def _operations(self) -> dict[str, Callable[..., dict[str, Any]]]:
        """Operation name -> the method that runs it: ``op_`` and the name with ``.`` as
        ``_`` (``key.window.hit`` -> ``op_key_window_hit``), for every operation of the
        table (conformance/core/operations.py) this driver has a method for."""
        found = {op: getattr(self, "op_" + op.replace(".", "_"), None) for op in OPERATIONS}
        return {op: method for op, method in found.items() if method is not None}

    # -- codec ----------------------------------------------------------------------------

    def _codec(self, scope: int | None = None, scale_dtype: str | None = None) -> Any:
        kc = self.kv_codec
        kwargs: dict[str, Any] = {}
        if scope is not None:
            kwargs["scale_scope"] = kc.ScaleScope(scope)
        if scale_dtype is not None:
            kwargs["scale_dtype"] = dtype_from_name(scale_dtype)
        return kc.AsymK16V8Codec(**kwargs)

    def _from_bytes(self, blob: bytes, allow_trailing: bool, hashes: Any = None) -> Any:
        codec = self._codec()
        kwargs: dict[str, Any] = {}
        if hashes is not None:
            kwargs["expected_hashes"] = hashes
        if allow_trailing and _accepts_kwarg(codec.from_bytes, "allow_trailing"):
            kwargs["allow_trailing"] = True
        return codec.from_bytes(blob, **kwargs)

    def op_codec_parse(
        self, blob: bytes, allow_trailing: bool = False, **expect: str | None
    ) -> dict[str, Any]:
        hashes = None
        given = {k.removeprefix("expect_"): v for k, v in expect.items() if v is not None}
        if given:
            hashes = self.kv_codec.CodecHashes(**given)
        enc = self._from_bytes(blob, allow_trailing, hashes)
        out: dict[str, Any] = {
            "scale_scope": int(enc.scale_scope),
            "k_dtype": dtype_name(enc.k_dtype),
            "v_dtype": dtype_name(enc.v_dtype),
            "scale_dtype": dtype_name(enc.scale_dtype),
            "scale_shape": [int(d) for d in enc.scale_shape],
            "header_len": len(enc.header_bytes),
        }
        for name in (*HEADER_GEOMETRY, "k_payload_len", "v_payload_len", "scale_payload_len"):
            out[name] = int(getattr(enc, name))
        for name in HASH_KEYS:
            out[name] = getattr(enc.hashes, name) or ""
        return out

    def op_codec_decode(self, blob: bytes, out_v_dtype: str | None = None) -> dict[str, Any]:
        codec = self._codec()
        enc = self._from_bytes(blob, False)
        k, v, scales = codec.decode(enc, out_v_dtype=dtype_from_name(out_v_dtype))
        return {
            "k": tensor_bytes(k),
            "k_dtype": dtype_name(k.dtype),
            "k_shape": list(k.shape),
            "v": tensor_bytes(v),
            "v_dtype": dtype_name(v.dtype),
            "v_shape": list(v.shape),
            "scales": tensor_bytes(scales),
            "scales_dtype": dtype_name(scales.dtype),
            "scales_shape": list(scales.shape),
        }

    def op_codec_encode(
        self,
        k: bytes,
        v: bytes,
        dtype: str,
        shape: list[int],
        scale_scope: int,
        head_axis: int = -2,
        page_axis: int | None = None,
        v_scales: bytes | None = None,
        scales_shape: list[int] | None = None,
        scale_dtype: str | None = None,
        **meta: Any,
    ) -> dict[str, Any]:
        kc = self.kv_codec
        torch_dtype = dtype_from_name(dtype)
        assert torch_dtype is not None
        kt = tensor_from_bytes(k, torch_dtype, shape)
        vt = tensor_from_bytes(v, torch_dtype, shape)
        codec = self._codec(scale_scope, scale_dtype)
        hashes = kc.CodecHashes(**{h: meta.pop(h) or "" for h in HASH_KEYS if h in meta})
        kwargs: dict[str, Any] = {"hashes": hashes, "head_axis": head_axis}
        if page_axis is not None:
            kwargs["page_axis"] = page_axis
        kwargs.update({name: value for name, value in meta.items() if value is not None})
        if v_scales is not None:
            scales = tensor_from_bytes(v_scales, torch.float32, list(scales_shape or []))
            # Q-SCALE: V is quantized with the scales as stored, in scale_dtype.
            scales = scales.to(dtype_from_name(scale_dtype) or torch.float32)
            scope = kc.ScaleScope(scale_scope)
            kwargs["precomputed_v_scales"] = scales
            kwargs["precomputed_v_quant"] = kc.quantize_v_fp8(
                vt, scales, scope, head_axis=head_axis, page_axis=page_axis
            )
        enc = codec.encode(kt, vt, **kwargs)
        return {"blob": bytes(codec.to_bytes(enc))}

    # -- protocol -------------------------------------------------------------------------

    def op_proto_client_write(
        self,
        command: int,
        key: str,
        length: int,
        fmt: int,
        dtype: str | None,
        location: str | None,
        shape: list[int],
    ) -> dict[str, Any]:
        p = self.protocol
        msg = p.ClientMetaMessage(
            p.ClientCommand(command),
            p.parse_cache_key(key),
            length,
            p.MemoryFormat(fmt),
            dtype_from_name(dtype),
            torch.Size(shape),
            location,
        )
        return {"msg": bytes(msg.serialize())}

    def op_proto_client_read(self, msg: bytes) -> dict[str, Any]:
        m = self.protocol.ClientMetaMessage.deserialize(msg)
        return {
            "command": int(m.command),
            "key": m.key.to_string(),
            "key_kind": type(m.key).__name__,
            "length": int(m.length),
            "fmt": int(m.fmt.value),
            "dtype": dtype_name(m.dtype),
            "location": m.location,
            "shape": [int(d) for d in m.shape],
        }

    def op_proto_server_write(
        self,
        code: int,
        length: int,
        fmt: int,
        dtype: str | None,
        location: str | None,
        shape: list[int],
    ) -> dict[str, Any]:
        p = self.protocol
        msg = p.ServerMetaMessage(
            p.ServerReturnCode(code),
            length,
            p.MemoryFormat(fmt),
            dtype_from_name(dtype),
            torch.Size(shape),
            location,
        )
        return {"msg": bytes(msg.serialize())}

    def op_proto_server_read(self, msg: bytes) -> dict[str, Any]:
        m = self.protocol.ServerMetaMessage.deserialize(msg)
        return {
            "code": int(m.code),
            "length": int(m.length),
            "fmt": int(m.fmt.value),
            "dtype": dtype_name(m.dtype),
            "location": m.location,
            "shape": [int(d) for d in m.shape],
        }

    def _remote_setup(self, num_groups: int) -> None:
        self.protocol.init_remote_metadata_info(num_groups)

    def op_proto_remote_write(
        self,
        num_groups: int,
        length: int,
        fmt: int,
        dtypes: list[str],
        shape_ranks: list[int],
        shape_dims: list[int],
    ) -> dict[str, Any]:
        p = self.protocol
        self._remote_setup(num_groups)
        shapes, pos = [], 0
        for rank in shape_ranks:
            shapes.append(torch.Size(shape_dims[pos : pos + rank]))
            pos += rank
        meta = p.RemoteMetadata(
            length, shapes, [dtype_from_name(d) for d in dtypes], p.MemoryFormat(fmt)
        )
        return {"msg": bytes(meta.serialize())}

    def op_proto_remote_read(self, num_groups: int, msg: bytes) -> dict[str, Any]:
        self._remote_setup(num_groups)
        meta = self.protocol.RemoteMetadata.deserialize(msg)
        return {
            "length": int(meta.length),
            "fmt": int(meta.fmt.value),
            "dtypes": [dtype_name(d) for d in meta.dtypes],
            "shape_ranks": [len(s) for s in meta.shapes],
            "shape_dims": [int(d) for s in meta.shapes for d in s],
        }

    # -- keys -----------------------------------------------------------------------------

    def op_key_cache_write(
        self,
        model_name: str,
        world_size: int,
        worker_id: int,
        chunk_hash_int: str,
        dtype: str,
        layer_id: int | None = None,
        tag_names: list[str] | None = None,
        tag_values: list[str] | None = None,
    ) -> dict[str, Any]:
        p = self.protocol
        configs = {
            TAG_PREFIX + n: v for n, v in zip(tag_names or [], tag_values or [], strict=True)
        }
        args = {
            "model_name": model_name,
            "world_size": world_size,
            "worker_id": worker_id,
            "chunk_hash": int(chunk_hash_int, 16),
            "dtype": dtype_from_name(dtype),
            "request_configs": configs,
        }
        if layer_id is None:
            key = p.CacheEngineKey(**args)
        else:
            key = p.LayerCacheEngineKey(**args, layer_id=layer_id)
        return {"key": key.to_string()}

    def op_key_cache_read(self, key: str) -> dict[str, Any]:
        parsed = self.protocol.parse_cache_key(key)
        tags = list(parsed.tags or ())
        chunk_hash = parsed.chunk_hash
        return {
            "key_kind": type(parsed).__name__,
            "model_name": parsed.model_name,
            "world_size": int(parsed.world_size),
            "worker_id": int(parsed.worker_id),
            "chunk_hash_int": chunk_hash.hex()
            if isinstance(chunk_hash, bytes)
            else format(chunk_hash, "x"),
            "dtype": dtype_name(parsed.dtype),
            "layer_id": getattr(parsed, "layer_id", None),
            "tag_names": [str(n) for n, _ in tags],
            "tag_values": [str(v) for _, v in tags],
        }

    def _object_key(
        self,
        chunk_hash: bytes,
        model_name: str,
        kv_rank: int,
        object_group_id: int = 0,
        cache_salt: str = "",
    ) -> Any:
        return self.keys.ObjectKey(
            chunk_hash=chunk_hash,
            model_name=model_name,
            kv_rank=kv_rank,
            object_group_id=object_group_id,
            cache_salt=cache_salt,
        )

    @staticmethod
    def _key_fields(key: Any) -> dict[str, Any]:
        return {
            "chunk_hash": bytes(key.chunk_hash),
            "model_name": key.model_name,
            "kv_rank": int(key.kv_rank),
            "object_group_id": int(key.object_group_id),
            "cache_salt": key.cache_salt,
        }

    def op_key_object_new(self, **fields: Any) -> dict[str, Any]:
        return self._key_fields(self._object_key(**fields))

    def op_key_kv_rank(
        self, world_size: int, global_rank: int, local_world_size: int, local_rank: int
    ) -> dict[str, Any]:
        rank = self.keys.ObjectKey.ComputeKVRank(
            world_size, global_rank, local_world_size, local_rank
        )
        return {"kv_rank": int(rank)}

    def op_key_encoded_write(self, **fields: Any) -> dict[str, Any]:
        enc = self._object_key(**fields).to_encoded_object_key()
        to_json = getattr(enc, "to_json_dict", None)
        obj = to_json() if to_json is not None else dataclasses.asdict(enc)
        return {"json_text": json.dumps(obj, ensure_ascii=False, sort_keys=True)}

    def op_key_encoded_read(self, json_text: str) -> dict[str, Any]:
        obj = json.loads(json_text)
        cls = self.keys.EncodedObjectKey
        from_json = getattr(cls, "from_json_dict", None)
        enc = from_json(obj) if from_json is not None else cls(**obj)
        return self._key_fields(enc.to_object_key())

    def _parsed_key(self, key: Any, text: str) -> dict[str, Any]:
        if key is None:
            raise _Rejected(f"the reader returned None for {text!r}")
        return self._key_fields(key)

    def op_key_fs_write(self, **fields: Any) -> dict[str, Any]:
        return {"filename": self.keys.object_key_to_filename(self._object_key(**fields))}

    def op_key_fs_read(self, filename: str) -> dict[str, Any]:
        return self._parsed_key(self.keys.filename_to_object_key(filename), filename)

    def op_key_s3_write(self, **fields: Any) -> dict[str, Any]:
        return {"object_name": self.keys.object_key_to_string(self._object_key(**fields))}

    def op_key_s3_read(self, object_name: str) -> dict[str, Any]:
        return self._parsed_key(self.keys.string_to_object_key(object_name), object_name)

    def _ipc_key(self, model_name: str, world_size: int, worker_id: int | None, salt: str) -> Any:
        return types.SimpleNamespace(
            model_name=model_name, world_size=world_size, worker_id=worker_id, cache_salt=salt
        )

    def op_key_ipc(
        self,
        model_name: str,
        world_size: int,
        worker_id: int | None,
        cache_salt: str,
        chunk_hashes: list[bytes],
        object_group_ids: list[int],
    ) -> dict[str, Any]:
        ipc = self._ipc_key(model_name, world_size, worker_id, cache_salt)
        groups = self.keys.ipc_key_to_object_keys(ipc, chunk_hashes, object_group_ids)
        flat = [k for group in groups for k in group]
        return {
            "group_sizes": [len(g) for g in groups],
            "keys_chunk_hash": [bytes(k.chunk_hash) for k in flat],
            "keys_kv_rank": [int(k.kv_rank) for k in flat],
            "keys_object_group_id": [int(k.object_group_id) for k in flat],
            "keys_model_name": [k.model_name for k in flat],
            "keys_cache_salt": [k.cache_salt for k in flat],
        }

    # -- descriptors ----------------------------------------------------------------------

    def op_key_window(self, windows: list[int], object_group_id: int) -> dict[str, Any]:
        """KEY-WINDOW-VALUES: build an AttnWindowDesc and ask about one group."""
        desc = self.keys.AttnWindowDesc(num_chunks_in_sw=list(windows))
        return {
            "num_object_groups": int(desc.num_object_groups),
            "full_attention": bool(desc.is_full_attention(object_group_id)),
        }

    def op_key_window_hit(
        self, windows: list[int], object_group_id: int, num_prefix_chunks: int
    ) -> dict[str, Any]:
        """KEY-WINDOW-HIT: the prefix chunks a group needs to serve a hit."""
        desc = self.keys.AttnWindowDesc(num_chunks_in_sw=list(windows))
        needed = desc.required_chunks(object_group_id, num_prefix_chunks)
        return {"required_chunks": [int(c) for c in needed]}

    def op_key_layout(
        self, dtypes: list[str], shape_ranks: list[int], shape_dims: list[int]
    ) -> dict[str, Any]:
        """KEY-LAYOUT-LENGTHS: build a MemoryLayoutDesc from per-group shapes and dtypes."""
        shapes, pos = [], 0
        for rank in shape_ranks:
            shapes.append(torch.Size(shape_dims[pos : pos + rank]))
            pos += rank
        desc = self.keys.MemoryLayoutDesc(
            shapes=shapes, dtypes=[dtype_from_name(d) for d in dtypes]
        )
        return {
            "dtypes": [dtype_name(d) for d in desc.dtypes],
            "shape_ranks": [len(s) for s in desc.shapes],
            "shape_dims": [int(d) for s in desc.shapes for d in s],
        }

    # -- serde ----------------------------------------------------------------------------

    def op_serde_serialize(self, **fields: Any) -> dict[str, Any]:
        return serde_ops.serialize(self.serde, self.kv_codec.ScaleScope, **fields)

    def op_serde_deserialize(self, **fields: Any) -> dict[str, Any]:
        return serde_ops.deserialize(self.serde, self.kv_codec.ScaleScope, **fields)

    def op_serde_estimate(self, **fields: Any) -> dict[str, Any]:
        return serde_ops.estimate(self.serde, self.kv_codec.ScaleScope, **fields)


def _optional_submodule(package: str, name: str) -> types.ModuleType | None:
    """``package.name``, or None when the package has no such module."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{package}.{name}".startswith(exc.name):
            return None
        raise


def load_package(package: str, name: str | None = None) -> PythonDriver:
    """``python:PKG``: a package with ``PKG.kv_codec``, ``PKG.protocol``, ``PKG.keys`` and,
    optionally, ``PKG.serde``."""
    mods = [importlib.import_module(f"{package}.{m}") for m in ("kv_codec", "protocol", "keys")]
    root = importlib.import_module(package)
    version = getattr(root, "__version__", None)
    serde = _optional_submodule(package, "serde")
    return PythonDriver(name or package, *mods, version=version, serde=serde)
