"""The serde contract (SPEC.md "The serde contract"): what any serde registered with LMCache's
factory, a plugin's too, must do for LMCache to store and serve with it. Each property is
measured on its own and gives an :class:`Observation`; tests/test_serde_plugins.py holds every
registered serde to them against a known-failure list of their own
(conformance/known_failures/serde-plugins.txt).

- ``lmcache-calls``: one object through the processor the installed release's factory builds,
  called as its L2 wrapper calls it (``submit_serialize(srcs, dsts, keys)``, polled; then
  ``submit_deserialize``): the calling convention of that release.
- ``announced-size``: on the serde's own calls (its serializer called with the arguments its
  signature takes), the bytes written equal ``estimate_serialized_size`` of the layout: the
  adapters store and read the size the wrapper was told.
- ``roundtrip``: on its own calls, a lossless serde gives back every bit; a lossy one gives back
  finite values of the object's shape and dtype (its relative error is recorded).
- ``damaged-frames``: its deserializer, in a process of its own under a memory limit and a time
  limit, on frames cut, emptied, grown, with a flipped byte, and with each of the first bytes
  set to 0x00 and to 0xff (a header's fields at their extremes): every one refused or served,
  never a hang, an allocation past the limit or a dead process; what was served is recorded.
- ``memory``: one round trip of a 64 MiB object on its own calls, in a process of its own,
  grows the peak resident size by at most MEMORY_FACTOR times the object (its temporaries are
  bounded by the object's size).
- ``store-load``: objects stored and prefetched through the release's own StorageManager (an
  ``fs`` store): every object stored, and read back (exact for a lossless serde).

A serde the factory cannot build or call is measured on its own calls anyway, so that every
property is known.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from . import catalogue
from .lmcache_close import close_bounded
from .lmcache_serde_calls import (
    LMCacheObj,
    ObjectKeyFields,
    SerdeFailed,
    build_processor,
    first_line,
    roundtrip,
)
from .serde_plugins import PLUGINS_ENV, load_all, registered_names

PROPERTIES = (
    "lmcache-calls", "announced-size", "roundtrip", "damaged-frames", "memory", "store-load",
)  # fmt: skip
#: The object measured: one chunk of LMCache's layout [2, layers, tokens, heads x head_dim].
SHAPE = (2, 4, 16, 256)
DTYPE = torch.bfloat16
HEAD_DIM = 128
#: ``damaged-frames``: the child's address-space limit and its time limit.
DAMAGE_MEMORY_BYTES = 4 << 30
DAMAGE_TIMEOUT_S = 120.0
#: ``memory``: the object of the measure (64 MiB: [2, 32, 256, 2048] bf16), and the most its
#: serialize and deserialize may add to the peak resident size, in multiples of the object.
MEMORY_SHAPE = (2, 32, 256, 2048)
MEMORY_FACTOR = 16
#: The first bytes of a frame set to 0x00 and to 0xff, one at a time.
HEADER_BYTES = 24


@dataclass(frozen=True)
class Observation:
    """One property of one serde: held or not, and what was seen (one line)."""

    prop: str
    ok: bool
    seen: str


def serde_spec(row: catalogue.Serde, master_key: Path | None) -> dict[str, Any]:
    """The ``"serde"`` object of a store of ``row`` (a key file where it takes one)."""
    spec = row.l2_object(master_key, HEAD_DIM) or {"type": row.name}
    return dict(spec)


def _call(method: Callable[..., Any], *args: Any) -> Any:
    """``method`` with as many of ``args`` as its signature takes (its own convention)."""
    takes = len(inspect.signature(method).parameters)
    return method(*args[:takes])


def sample() -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    return (torch.randn(SHAPE, generator=generator) * 2).to(DTYPE)


def own_roundtrip(
    spec: dict[str, Any], obj: torch.Tensor | None = None
) -> tuple[bytes, int, torch.Tensor]:
    """(frame, announced size, object read back) on the serde's own calls (its processor's
    serializer and deserializer, called with the arguments their signatures take)."""
    api = importlib.import_module("lmcache.v1.distributed.api")
    processor = build_processor(spec)
    try:
        ser, des = processor._serializer, processor._deserializer
        obj = sample() if obj is None else obj
        announced = int(ser.estimate_serialized_size(api.MemoryLayoutDesc([obj.shape], [DTYPE])))
        dst = LMCacheObj(torch.zeros(max(announced, 1), dtype=torch.uint8))
        written = int(_call(ser.serialize, LMCacheObj(obj), dst, ObjectKeyFields()))
        frame = dst.tensor[:written].numpy().tobytes()
        back = LMCacheObj(torch.zeros_like(obj))
        _call(des.deserialize, LMCacheObj(dst.tensor[:written].clone()), back, ObjectKeyFields())
        return frame, announced, back.tensor
    finally:
        close_bounded(processor)


def lmcache_calls(spec: dict[str, Any]) -> Observation:
    """One object through the release's processor, as its L2 wrapper calls it."""
    try:
        trip = roundtrip(spec, [sample()])[0]
    except SerdeFailed as exc:
        return Observation("lmcache-calls", False, str(exc))
    return Observation("lmcache-calls", True, f"{trip.written} bytes written, read back")


def own_calls(row: catalogue.Serde, spec: dict[str, Any]) -> list[Observation]:
    """``announced-size`` and ``roundtrip``, on the serde's own calls."""
    try:
        frame, announced, back = own_roundtrip(spec)
    except Exception as exc:  # a serde's failure, whatever it is
        seen = f"its own calls fail: {first_line(exc)}"
        return [Observation("announced-size", False, seen), Observation("roundtrip", False, seen)]
    size = Observation(
        "announced-size", len(frame) == announced,
        f"announces {announced} bytes, writes {len(frame)}",
    )  # fmt: skip
    obj = sample()
    if not row.lossy:
        same = torch.equal(back.view(torch.uint8), obj.view(torch.uint8))
        return [size, Observation("roundtrip", same, "bit-exact" if same else "bits changed")]
    finite = bool(torch.isfinite(back.float()).all())
    error = float((back.float() - obj.float()).norm() / obj.float().norm())
    ok = finite and back.shape == obj.shape and back.dtype == obj.dtype
    return [size, Observation("roundtrip", ok, f"lossy: relative error {error:.3f}")]


def damaged_frames(spec: dict[str, Any]) -> Observation:
    """Every damaged frame through the deserializer in a child process (this module run as a
    script), bounded in memory and time."""
    try:
        text = _run_self(
            ["damage", json.dumps(spec)], dict(os.environ), DAMAGE_TIMEOUT_S, _limit_memory
        )
    except RuntimeError as exc:  # a hang, or a process that died
        return Observation("damaged-frames", False, str(exc))
    result = json.loads(text)
    counts: dict[str, int] = result["counts"]
    bad = [k for k in counts if k.startswith(("memory", "own calls fail"))]
    seen = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    if served := result["served"]:
        seen += f"; served: {', '.join(served[:6])}" + (" ..." if len(served) > 6 else "")
    return Observation("damaged-frames", not bad, seen)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (DAMAGE_MEMORY_BYTES, DAMAGE_MEMORY_BYTES))


def _damaged(frame: bytes) -> list[tuple[str, bytes]]:
    faults = [
        ("cut", frame[: len(frame) // 2]), ("emptied", b""), ("grown", frame + bytes(64)),
        ("flipped", frame[: len(frame) // 2] + bytes([frame[len(frame) // 2] ^ 0x10])
         + frame[len(frame) // 2 + 1 :]),
    ]  # fmt: skip
    for i in range(min(HEADER_BYTES, len(frame))):
        for value in (0x00, 0xFF):
            faults.append((f"byte {i}={value:#04x}", frame[:i] + bytes([value]) + frame[i + 1 :]))
    return faults


def _damage_child(spec: dict[str, Any]) -> dict[str, Any]:
    """In the child: the outcome of each damaged frame, counted by kind (``counts``), and the
    faults whose frames were served (``served``)."""
    counts: dict[str, int] = {}
    try:
        frame, _, _ = own_roundtrip(spec)
    except Exception as exc:  # a serde's failure, whatever it is
        return {"counts": {f"own calls fail: {first_line(exc)}": 1}, "served": []}
    processor = build_processor(spec)
    des = processor._deserializer
    served: list[str] = []
    for fault, data in _damaged(frame):
        src = LMCacheObj(torch.tensor(list(data), dtype=torch.uint8))
        back = LMCacheObj(torch.zeros(SHAPE, dtype=DTYPE))
        try:
            _call(des.deserialize, src, back, ObjectKeyFields())
            kind = "served"
            served.append(fault)
        except MemoryError:
            kind = "memory: MemoryError"
        except Exception as exc:
            kind = f"refused ({type(exc).__name__})"
        counts[kind] = counts.get(kind, 0) + 1
    close_bounded(processor)
    return {"counts": counts, "served": served}


def memory(spec: dict[str, Any]) -> Observation:
    """Peak resident growth of one own-calls round trip of a 64 MiB object, in a child."""
    try:
        text = _run_self(["memory", json.dumps(spec)], dict(os.environ), DAMAGE_TIMEOUT_S)
    except RuntimeError as exc:
        return Observation("memory", False, str(exc))
    result = json.loads(text)
    if "error" in result:
        return Observation("memory", False, f"its own calls fail: {result['error']}")
    ratio = result["growth"] / result["object"]
    seen = f"peak grew by {ratio:.1f} times the object's {result['object'] >> 20} MiB"
    return Observation("memory", ratio <= MEMORY_FACTOR, seen)


def _memory_child(spec: dict[str, Any]) -> dict[str, Any]:
    """In the child: the growth of the peak resident size (``ru_maxrss``) over one round trip,
    the object already made (and its output's room, allocated by the serde's calls)."""
    generator = torch.Generator().manual_seed(3)
    obj = torch.randn(MEMORY_SHAPE, generator=generator).to(DTYPE)
    try:
        own_roundtrip(spec)  # warm: what the serde loads once is not the object's cost
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        own_roundtrip(spec, obj)
    except Exception as exc:  # a serde's failure, whatever it is
        return {"error": first_line(exc)}
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"growth": max(0, after - before), "object": obj.numel() * obj.element_size()}


def store_load(row: catalogue.Serde, spec: dict[str, Any], python: str) -> Observation:
    """Objects stored and prefetched through the release's own StorageManager (fs)."""
    from .lmcache_writer import (
        PlannedObject,
        StoreWriteError,
        missing_objects,
        read_back,
        write_store,
    )

    plan = [PlannedObject("org/model", 0, 0, bytes([i]) * 32, "", SHAPE, i) for i in range(4)]
    with tempfile.TemporaryDirectory(prefix="lmckv-contract-") as folder:
        store = json.dumps({"type": catalogue.FS.name, "base_path": folder, "serde": spec})
        with contextlib.suppress(StoreWriteError):  # what is missing is counted below
            write_store(store, plan, python=python, timeout=120.0)
        stored = len(plan) - len(missing_objects(store, plan))
        reads = read_back(store, plan, python=python, timeout=120.0)
    hits = sum(r.hit for r in reads)
    exact = sum(r.exact for r in reads)
    ok = stored == len(plan) and hits == len(plan) and (row.lossy or exact == len(plan))
    return Observation(
        "store-load", ok, f"{stored} of {len(plan)} stored, {hits} hits, {exact} exact"
    )


def observe_here(name: str, master_key: Path, python: str) -> list[Observation]:
    """Every property of serde ``name`` (registered in this process), in PROPERTIES order."""
    row = catalogue.serde(name)
    spec = serde_spec(row, master_key)
    return [
        lmcache_calls(spec),
        *own_calls(row, spec),
        damaged_frames(spec),
        memory(spec),
        store_load(row, spec, python),
    ]


#: This module, as ``python -m`` runs it (``__name__`` is ``__main__`` there).
MODULE = f"{__package__}.serde_contract"
#: Seconds the whole contract of one serde may take in its process.
OBSERVE_TIMEOUT_S = 600.0


def _run_self(
    args: list[str],
    env: dict[str, str],
    timeout: float,
    limit: Callable[[], None] | None = None,
) -> str:
    """This module's command ``args`` in a fresh process (its own session, killed whole on
    timeout; ``limit`` run in it first, a resource limit); its last line of JSON.
    RuntimeError with the process's last words otherwise."""
    argv = [sys.executable, "-m", MODULE, *args]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True, preexec_fn=limit,
    ) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            raise RuntimeError(f"serde contract {args[:2]}: over {timeout:.0f} s") from None
    lines = [ln for ln in out.splitlines() if ln.startswith(("{", "["))]
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"serde contract {args[:2]}: exit {proc.returncode}: {tail[:300]}")
    return lines[-1]


def registered_with(plugins: list[str]) -> list[str]:
    """The serdes LMCache registers in a fresh process that loads ``plugins`` (this process's
    registry is left as it is)."""
    env = {**os.environ, PLUGINS_ENV: ",".join(plugins)}
    return list(json.loads(_run_self(["names"], env, OBSERVE_TIMEOUT_S)))


def observe(name: str, plugins: list[str], master_key: Path) -> list[Observation]:
    """:func:`observe_here` in a fresh process that loads ``plugins`` first."""
    env = {**os.environ, PLUGINS_ENV: ",".join(plugins)}
    text = _run_self(["observe", name, str(master_key)], env, OBSERVE_TIMEOUT_S)
    return [Observation(**o) for o in json.loads(text)]


def main(argv: list[str]) -> int:
    """``names`` | ``observe SERDE KEY_FILE`` | ``damage SPEC_JSON``, after loading the
    plugins of PLUGINS_ENV; one line of JSON on standard output."""
    load_all([])
    if argv == ["names"]:
        print(json.dumps(sorted(registered_names())))
    elif len(argv) == 3 and argv[0] == "observe":
        observed = observe_here(argv[1], Path(argv[2]), sys.executable)
        print(json.dumps([asdict(o) for o in observed]))
    elif len(argv) == 2 and argv[0] == "damage":
        print(json.dumps(_damage_child(json.loads(argv[1]))))
    elif len(argv) == 2 and argv[0] == "memory":
        print(json.dumps(_memory_child(json.loads(argv[1]))))
    else:
        usage = "names | observe SERDE KEY_FILE | damage SPEC | memory SPEC"
        print(f"usage: serde_contract {usage}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
