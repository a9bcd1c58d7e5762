"""The one catalogue of the L2 adapters and serdes lmckv knows (SPEC.md "A store"): a row per
adapter and a row per serde, as bowtie's table of connectables is for its harness.

Every other module reads these rows: fsck (which client lists a store, which name form its
entries must have, how a serde's frames are recognised and checked), the fault suite (which
adapters and serdes its cells cover, where a frame's payload lies, what a serde can tell),
the store writer (the ``--l2-adapter`` JSON LMCache is given, what a read gives back), the
store-path benchmark and the end-to-end serde table. Nothing else spells an adapter's or a
serde's name: adding one is adding its row here (CONTRIBUTING.md, "Adding a serde or an
adapter"), and :func:`register_serde` adds a row at run time (a test's fake serde, an
operator's plugin).

- An :class:`Adapter` names LMCache's adapter ``type``, the form of its objects' names
  (KEY-FS-FORM or KEY-STRING-FORM, with valkey's optional ``<key_prefix>@``), the fields of
  its spec that say where its store is (a reader from :mod:`.spec`), the one client that reads
  and writes such a store (:mod:`.sources`, for fsck and for the tests alike), and how a test
  starts an empty store of it on this machine (:mod:`.servers`; None where none can run here).
- A :class:`Serde` names LMCache's serde ``type`` (``none``: no serde object), the frame it
  puts around an object's bytes (bytes before and after the payload, the first bytes every
  frame starts with), how content is verified (:class:`Check`: only the size, an AEAD tag
  under a key file, an LMCKV blob's own CRC), what a read gives back (a cast to another dtype
  and back), and what its spec needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import checksum_frame, servers, tq01_frame
from .checksum_frame import FINGERPRINT_BYTES, fingerprint
from .framing import AESGCM_IV_BYTES, AESGCM_TAG_BYTES, AESGCM_VERSION, LMCKV_MAGIC
from .locations import (
    Location,
    file_location,
    host_port_location,
    s3_endpoint_location,
    startup_nodes_location,
)
from .names import NameForm
from .sources import FileSource, RedisSource, S3Source, Source


class Check(Enum):
    """What of an object's content can be verified without LMCache."""

    #: Nothing but its size against the group's layout (no header, no checksum).
    SIZE = "size"
    #: An AEAD tag, with the key the spec's key file derives (an aesgcm frame).
    TAG = "tag"
    #: The object is one LMCKV blob, verified by its own header and CRC.
    BLOB = "blob"
    #: A hash of the payload and the chunk's fingerprint in a fixed header (a checksum frame).
    HASH = "hash"
    #: A frame whose structure is checked against its own header; its content cannot be
    #: (a TQ01 frame: quantized, no checksum).
    FRAME = "frame"


#: Starts an empty store of an adapter in a folder, its servers stopped when the stack
#: closes; the store's fields of an ``--l2-adapter`` spec. Raises servers.StoreUnavailable.
TestStore = Callable[[Path, contextlib.ExitStack], dict[str, Any]]


@dataclass(frozen=True)
class Server:
    """Where in a test store's spec fields its server's loopback port is."""

    #: The port the fields name.
    port: Callable[[dict[str, Any]], int]
    #: The fields of the same store reached through another port (a proxy in front).
    via: Callable[[dict[str, Any], int], dict[str, Any]]
    #: How an object's name appears in the adapter's request for it.
    needle: Callable[[str], bytes]


@dataclass(frozen=True)
class Adapter:
    """One L2 adapter type of LMCache."""

    name: str
    form: NameForm
    #: Reads the spec's fields that say where the store is.
    location: Callable[[dict[str, Any]], Location]
    #: The one client of such a store (fsck's listing and reads, the tests' damage).
    client: Callable[[Any], Source]
    #: How a test starts an empty store of it here; None: none runs on this machine.
    test_store: TestStore | None = None
    #: Its test store's server (None: a folder, no connection to cut).
    server: Server | None = None
    #: Whether names may carry the spec's ``key_prefix`` (``<key_prefix>@<name>``).
    key_prefix: bool = False
    #: Whether its spec takes ``max_capacity_gb`` and an ``eviction`` block (LMCache 0.5.3
    #: to 0.5.7rc2; ``fs`` has only the per-salt quota).
    capacity: bool = False

    @property
    def has_server(self) -> bool:
        """Whether the store is reached over a connection (one a proxy can cut)."""
        return self.server is not None

    @property
    def files(self) -> bool:
        """Whether objects are files written under a temporary name first."""
        return self.form is NameForm.FILE


@dataclass(frozen=True)
class Serde:
    """One serde of LMCache's L2 adapters (or ``none``: the object's bytes as they are)."""

    name: str
    check: Check = Check.SIZE
    #: Frame bytes before and after the payload (the layout's bytes, cast or encrypted).
    head: int = 0
    tail: int = 0
    #: The first bytes of every frame (b"": nothing recognises the serde's objects).
    magic: bytes = b""
    #: The dtype each element is cast to and back (what a read gives back), if lossy so.
    cast: str | None = None
    #: Whether its spec names LMCache's ``master_key_path`` (and ``aes_bits``).
    key_file: bool = False
    #: Fields LMCache's serde factory is given besides ``type`` (and the key file).
    options: dict[str, Any] = field(default_factory=dict)
    #: Whether LMCache's serde factory is asked for it by name (``none`` and lmckv's own
    #: name for LMCKV blobs are not serdes LMCache builds).
    lmcache: bool = True
    #: Whether the fault suite writes stores with it through LMCache on this machine.
    faults: bool = False
    #: Whether it needs the model's ``head_dim`` in its spec.
    head_dim: bool = False
    #: Whether lmckv knows its frames well enough to check a store of it (fsck).
    checkable: bool = True
    #: STORE-LOAD-KEY: whether a read is judged to tell another key's object (SHOULD).
    binds_key: bool = False
    #: The rules of its frame and its tag, for a serde that has them.
    frame_rule: str = ""
    tag_rule: str = ""
    #: Whether its frame carries the key's chunk fingerprint after the version byte (told
    #: from another frame of the same version by it).
    fingerprint: bool = False
    #: Whether a read gives back other values than were stored (a cast, a quantizer).
    lossy: bool = False
    #: A serde no release registers: where it comes from, in words an operator acts on (the
    #: plugin and the ``--serde-plugin`` that registers it, or the pull request that adds it).
    origin: str = ""

    @property
    def overhead(self) -> int:
        """Bytes the frame adds to the payload."""
        return self.head + self.tail

    @property
    def verifiable(self) -> bool:
        """Whether a changed byte of the content can be seen (a tag or a CRC)."""
        return self.check in (Check.TAG, Check.BLOB, Check.HASH)

    @property
    def proves_damage(self) -> bool:
        """Whether fsck's problems with its objects prove them damaged, so that ``--repair``
        may remove them (SPEC.md FSCK-REPAIR-WHAT): not for a serde whose frames lmckv does
        not know (``unknown``, a plugin's without a row of its own), whose sizes it can only
        learn from the store itself."""
        return self.checkable and not (self.origin and self.check is Check.SIZE)

    def payload_size(self, stored: int) -> int:
        """The bytes of an object of ``stored`` bytes that its layout sizes."""
        return stored - self.overhead

    def payload_span(self, stored: int) -> tuple[int, int]:
        """Where the payload lies in an object of ``stored`` bytes: (first, end)."""
        return self.head, stored - self.tail

    def frame_problem(self, head: bytes, size: int) -> str | None:
        """Why an object (its first bytes and size) is no frame of this serde, or None."""
        if size < self.overhead:
            return f"{size} bytes: shorter than the {self.overhead} bytes of a {self.name} frame"
        if self.magic and head[: len(self.magic)] != self.magic:
            seen = head[: len(self.magic)].hex() or "none"
            return f"frame version {seen}, expected {self.magic.hex()}"
        return None

    def recognises(self, head: bytes, size: int, chunk_hash: bytes) -> bool:
        """Whether an object's first bytes (DETECT_BYTES of them) say it is this serde's
        frame, for the key whose chunk hash is ``chunk_hash``."""
        if not self.magic or self.frame_problem(head, size) is not None:
            return False
        at = len(self.magic)
        return not self.fingerprint or head[at : at + FINGERPRINT_BYTES] == fingerprint(chunk_hash)

    def l2_object(self, master_key: Path | None = None, head_dim: int | None = None) -> Any:
        """The ``"serde"`` object of an ``--l2-adapter`` spec that selects it (None: no
        serde object); ``master_key``: the key file of a serde that needs one."""
        if not self.lmcache:
            return None
        spec: dict[str, Any] = {"type": self.name, **self.options}
        if self.key_file and master_key is not None:
            spec["master_key_path"] = str(master_key)
        if self.head_dim and head_dim:
            spec["head_dim"] = head_dim
        return spec


# -- test stores on this machine ---------------------------------------------------------


def _folder(folder: Path, servers_: contextlib.ExitStack) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    return {"base_path": str(folder)}


def _redis(folder: Path, stack: contextlib.ExitStack) -> dict[str, Any]:
    if why := servers.missing_redis_server():
        raise servers.StoreUnavailable(why)
    server = stack.enter_context(servers.RedisServer(folder))
    # One connection (LMCache's default is 8): a connection a damaged object leaves unusable
    # then serves every later read, so what follows a damage is fixed, not luck (SPEC.md
    # STORE-LOAD-NEIGHBOURS, differences item 48).
    return {"host": servers.HOST, "port": server.port, "num_workers": 1}


def _s3(folder: Path, stack: contextlib.ExitStack) -> dict[str, Any]:
    if why := servers.missing_moto():
        raise servers.StoreUnavailable(why)
    server = stack.enter_context(servers.MotoS3Server(folder))
    bucket, endpoint = servers.loopback_s3_endpoint(server.port)
    server.create_bucket(bucket)
    return {
        "s3_endpoint": endpoint, "s3_region": "us-east-1", "disable_tls": True,
        "s3_prefer_http2": False, "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }  # fmt: skip


#: A RESP command carries the raw key.
REDIS_SERVER = Server(
    lambda f: int(f["port"]), lambda f, port: {**f, "port": port}, lambda name: name.encode()
)
#: An S3 request's path carries the URL-quoted key.
S3_SERVER = Server(
    lambda f: int(str(f["s3_endpoint"]).rsplit(":", 1)[1]),
    lambda f, port: {**f, "s3_endpoint": servers.loopback_s3_endpoint(port)[1]},
    lambda name: quote(name).encode(),
)


# -- the rows ---------------------------------------------------------------------------

FS = Adapter("fs", NameForm.FILE, file_location, FileSource, _folder)
#: LMCache's C++ client of the same layout: byte-identical names and content.
FS_NATIVE = Adapter("fs_native", NameForm.FILE, file_location, FileSource, _folder, capacity=True)
RESP = Adapter(
    "resp", NameForm.STRING, host_port_location, RedisSource, _redis, REDIS_SERVER,
    capacity=True,
)  # fmt: skip
#: No valkey client library here: no test store, fsck reads one server of it.
VALKEY = Adapter("valkey", NameForm.STRING, startup_nodes_location, RedisSource, key_prefix=True)
S3 = Adapter("s3", NameForm.STRING, s3_endpoint_location, S3Source, _s3, S3_SERVER, capacity=True)

NONE = Serde("none", lmcache=False, faults=True)
FP8 = Serde(
    "fp8", cast="float8_e4m3fn", options={"fp8_dtype": "float8_e4m3fn"}, faults=True, lossy=True
)
#: LMCache pull request #4558 (no release): the payload under a version, the chunk's
#: fingerprint and an xxh3_64 hash. Before aesgcm: both frames start 0x01.
CHECKSUM = Serde(
    "checksum", Check.HASH, head=checksum_frame.HEAD_BYTES,
    magic=bytes([checksum_frame.CHECKSUM_VERSION]), fingerprint=True, binds_key=True,
    frame_rule=checksum_frame.FRAME_RULE, tag_rule=checksum_frame.HASH_RULE,
    origin="LMCache pull request #4558, in no release",
)  # fmt: skip
AESGCM = Serde(
    "aesgcm", Check.TAG, head=1 + AESGCM_IV_BYTES, tail=AESGCM_TAG_BYTES,
    magic=bytes([AESGCM_VERSION]), key_file=True, faults=True, binds_key=True,
    frame_rule="STORE-AESGCM-FRAME", tag_rule="STORE-AESGCM-TAG",
)  # fmt: skip
#: LMCKV blobs as lmckv's writer and a release's asym serdes store them.
LMCKV = Serde("lmckv", Check.BLOB, magic=LMCKV_MAGIC, lmcache=False)
K16V8 = Serde("asym_k16_v8", Check.BLOB, magic=LMCKV_MAGIC)
K16V8_V_ONLY = Serde("asym_k16_v8_v_only", Check.BLOB, magic=LMCKV_MAGIC)
#: Needs CUDA (its Triton kernels): no store of it is written on this machine.
TURBOQUANT = Serde("turboquant", head_dim=True, checkable=False, lossy=True)
#: ``lmcache-turbo-quant-serde`` 0.1.0 (tqai 0.6): TQ01 frames, structure only.
TQAI = Serde(
    "tqai", Check.FRAME, magic=tq01_frame.MAGIC, head_dim=True, lossy=True,
    frame_rule=tq01_frame.RULE,
    origin="the plugin lmcache-turbo-quant-serde "
    "(--serde-plugin lmcache_turbo_quant_serde:register)",
)  # fmt: skip
#: What fsck calls a store whose frames no row recognises: raw, fp8, or a serde lmckv has no
#: row for. Only sizes are checked.
UNKNOWN = Serde("unknown", lmcache=False, checkable=False)

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (FS, FS_NATIVE, RESP, VALKEY, S3)}
#: In the order fsck tries to recognise them (LMCKV blobs before a one-byte version).
SERDES: dict[str, Serde] = {
    s.name: s
    for s in (NONE, FP8, CHECKSUM, AESGCM, LMCKV, K16V8, K16V8_V_ONLY, TQAI, TURBOQUANT, UNKNOWN)
}
#: The first bytes of an object fsck reads to recognise its serde.
DETECT_BYTES = 32


class UnknownName(KeyError):
    """A name the catalogue has no row for (the message lists the known ones)."""

    def __str__(self) -> str:
        return str(self.args[0])


def checkable_serdes() -> list[str]:
    """The serdes whose stores fsck can check, in catalogue order."""
    return [s.name for s in SERDES.values() if s.checkable]


def adapter(name: str) -> Adapter:
    """The row of adapter ``name``."""
    row = ADAPTERS.get(name)
    if row is None:
        raise UnknownName(f"adapter type {name!r}: lmckv knows {', '.join(ADAPTERS)}")
    return row


def serde(name: str) -> Serde:
    """The row of serde ``name``."""
    row = SERDES.get(name)
    if row is None:
        raise UnknownName(f"serde type {name!r}: lmckv knows {', '.join(SERDES)}")
    return row


def register_serde(row: Serde) -> None:
    """Add a serde's row (a plugin's, a test's); a name already there is refused."""
    if row.name in SERDES:
        raise ValueError(f"serde {row.name!r} is in the catalogue already")
    SERDES[row.name] = row


def adapters_here() -> list[Adapter]:
    """The adapters whose stores run on this machine's test servers, in catalogue order."""
    return [a for a in ADAPTERS.values() if a.test_store is not None]


def fault_serdes() -> list[Serde]:
    """The serdes the fault suite writes stores with, in catalogue order."""
    return [s for s in SERDES.values() if s.faults]


def detect_serde(heads: list[tuple[bytes, int, bytes]]) -> Serde:
    """The serde a sample of objects (their first DETECT_BYTES, sizes and chunk hashes) was
    written with: the first row that recognises most of them (a damaged object among them does
    not change what the store is), else ``unknown`` (raw and fp8 objects, and frames of a serde
    without a row, carry nothing to recognise: only their sizes are checked)."""
    sample = [(h, s, c) for h, s, c in heads if s > 0]
    for row in SERDES.values():
        if 2 * sum(row.recognises(h, s, c) for h, s, c in sample) > len(sample):
            return row
    return UNKNOWN


def lmcache_extra_serdes(registered: list[str], measured: tuple[str, ...]) -> list[str]:
    """Serdes of the catalogue that LMCache builds by name, which the installed release does
    not register (``registered``) and the caller does not measure otherwise (``measured``)."""
    return [
        s.name
        for s in SERDES.values()
        if s.lmcache and s.name not in registered and s.name not in measured
    ]
