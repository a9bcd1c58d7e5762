"""What store ``lmckv fsck`` checks: an L2 adapter's location and naming scheme, and the serde
that framed its objects (SPEC.md "A store").

An operator names a store to LMCache with ``--l2-adapter SPEC``, a JSON object: its ``type``
(``fs``, ``fs_native``, ``resp``, ``valkey``, ``s3``, ...), the adapter's own fields and an
optional ``"serde"`` object (``{"type": "fp8"}``, ``{"type": "aesgcm", "master_key_path": ...,
"aes_bits": 256}``). ``lmckv fsck --l2-adapter SPEC`` takes exactly that JSON; the short forms
``DIR``, ``redis://HOST:PORT[/DB]`` and ``s3://BUCKET`` (with ``--endpoint``) name the same
stores without a serde, which is then detected from the content.

Every refusal is a :class:`StoreSpecError` with one line saying what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, loads

#: Adapters whose objects are files in ``base_path`` (fs_native is LMCache's C++ client of the
#: same layout: byte-identical names and content).
FILE_ADAPTERS = ("fs", "fs_native")
#: Adapters whose objects are keys of a Redis-protocol server.
REDIS_ADAPTERS = ("resp", "valkey")
ADAPTERS = (*FILE_ADAPTERS, *REDIS_ADAPTERS, "s3")
#: The serdes a store's objects may be framed by: none (raw bytes), LMCache's registered
#: ``fp8`` and ``aesgcm``, and ``lmckv`` (LMCKV blobs: lmckv's writer, a release's asym serdes).
SERDES = ("none", "fp8", "aesgcm", "lmckv")
#: A spec longer than this is refused before it is parsed.
MAX_SPEC_BYTES = 64 * 1024
AES_BITS = (128, 256)


class StoreSpecError(ValueError):
    """A store that cannot be named this way (the message is one line)."""


@dataclass(frozen=True)
class SerdeSpec:
    """The serde of a store's objects; for aesgcm, the key file LMCache derives keys from."""

    type: str
    master_key_path: Path | None = None
    aes_bits: int = 128


@dataclass(frozen=True)
class FileLocation:
    base_path: Path
    #: ``relative_tmp_dir``: where the adapter writes a file before renaming it into place.
    tmp_dir: str | None = None


@dataclass(frozen=True)
class RedisLocation:
    host: str
    port: int
    db: int = 0
    username: str | None = None
    password: str | None = None
    #: valkey's ``key_prefix``: every key is ``<prefix>@<name>``.
    key_prefix: str = ""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    #: ``http[s]://HOST[:PORT]``: where the bucket's API answers.
    endpoint_url: str | None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    #: Objects under ``<prefix>/`` only (LMCache's adapter writes at the bucket's root).
    prefix: str = ""
    #: How the bucket is addressed: ``virtual`` (``BUCKET.HOST``, as LMCache's adapter does),
    #: ``path`` or ``auto`` (boto3's choice).
    addressing: str = "auto"


Location = FileLocation | RedisLocation | S3Location


@dataclass(frozen=True)
class StoreSpec:
    """One store: the adapter that names its objects, where they are, and their serde (None:
    detect it from the content)."""

    adapter: str
    location: Location
    serde: SerdeSpec | None

    @property
    def key_prefix(self) -> str:
        """valkey's ``key_prefix`` (every name starts ``<prefix>@``), else ""."""
        return self.location.key_prefix if isinstance(self.location, RedisLocation) else ""

    def describe(self) -> str:
        """Where the store is, in one line without secrets."""
        loc = self.location
        if isinstance(loc, FileLocation):
            return str(loc.base_path)
        if isinstance(loc, RedisLocation):
            prefix = f" (key_prefix {loc.key_prefix!r})" if loc.key_prefix else ""
            return f"redis://{loc.host}:{loc.port}/{loc.db}{prefix}"
        where = f"s3://{loc.bucket}" + (f"/{loc.prefix}" if loc.prefix else "")
        endpoint = loc.endpoint_url
        if endpoint and loc.addressing == "virtual":  # the host the adapter connects to
            scheme, _, host = endpoint.partition("://")
            endpoint = f"{scheme}://{loc.bucket}.{host}"
        return where + (f" at {endpoint}" if endpoint else "")


def _str(d: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = d.get(key)
    if value is None:
        if required:
            raise StoreSpecError(f"the adapter spec needs {key!r}")
        return None
    if not isinstance(value, str) or not value:
        raise StoreSpecError(f"{key!r} must be a non-empty string, got {value!r}")
    return value


def _port(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise StoreSpecError(f"{where}: a port is an integer from 1 to 65535, got {value!r}")
    return value


def parse_serde(value: object) -> SerdeSpec:
    """The ``"serde"`` object of an adapter spec."""
    if not isinstance(value, dict):
        raise StoreSpecError(f'"serde" must be an object, got {value!r}')
    kind = value.get("type")
    if kind not in SERDES or kind == "none":
        known = ", ".join(s for s in SERDES if s != "none")
        raise StoreSpecError(f"serde type {kind!r}: lmckv fsck knows {known}")
    if kind != "aesgcm":
        return SerdeSpec(kind)
    bits = value.get("aes_bits", 128)
    if bits not in AES_BITS:
        raise StoreSpecError(f"aes_bits must be 128 or 256, got {bits!r}")
    key = _str(value, "master_key_path")
    return SerdeSpec(kind, Path(key) if key else None, bits)


def _s3_location(d: dict[str, Any]) -> S3Location:
    """LMCache's ``s3_endpoint`` is ``BUCKET.HOST[:PORT]`` (or ``s3://BUCKET.HOST``): the
    bucket is the first label, and the adapter connects to the whole name."""
    endpoint = _str(d, "s3_endpoint", required=True)
    assert endpoint is not None
    host = endpoint.removeprefix("s3://")
    bucket, dot, rest = host.partition(".")
    if not dot or not bucket or not rest:
        raise StoreSpecError(f"s3_endpoint {endpoint!r}: expected BUCKET.HOST[:PORT]")
    disable_tls = d.get("disable_tls", False)
    if not isinstance(disable_tls, bool):
        raise StoreSpecError(f"disable_tls must be a boolean, got {disable_tls!r}")
    scheme = "http" if disable_tls else "https"
    return S3Location(
        bucket,
        f"{scheme}://{rest}",
        _str(d, "s3_region"),
        _str(d, "aws_access_key_id"),
        _str(d, "aws_secret_access_key"),
        addressing="virtual",  # the adapter connects to BUCKET.HOST itself
    )


def _redis_location(adapter: str, d: dict[str, Any]) -> RedisLocation:
    if adapter == "valkey":
        if d.get("cluster_mode"):
            raise StoreSpecError("valkey cluster_mode: lmckv fsck reads one server")
        nodes = _str(d, "startup_nodes", required=True)
        assert nodes is not None
        host, sep, port = nodes.split(",")[0].strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise StoreSpecError(f"startup_nodes {nodes!r}: expected HOST:PORT[,HOST:PORT...]")
        prefix = _str(d, "key_prefix") or ""
        if "@" in prefix:
            raise StoreSpecError(f"key_prefix {prefix!r} holds the separator '@'")
        return RedisLocation(
            host, _port(int(port), "startup_nodes"), 0, _str(d, "username"),
            _str(d, "password"), prefix,
        )  # fmt: skip
    server = _str(d, "host", required=True)
    assert server is not None
    return RedisLocation(
        server, _port(d.get("port"), "port"), 0, _str(d, "username"), _str(d, "password")
    )


def from_l2_adapter(text: str) -> StoreSpec:
    """The store an operator's ``--l2-adapter`` JSON names."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise StoreSpecError(f"the adapter spec is longer than {MAX_SPEC_BYTES} bytes")
    try:
        d = loads(text, JSONLimits(max_bytes=MAX_SPEC_BYTES), what="the adapter spec")
    except UntrustedJSONError as exc:
        raise StoreSpecError(f"the adapter spec is not JSON lmckv accepts: {exc}") from None
    if not isinstance(d, dict):
        raise StoreSpecError("the adapter spec must be a JSON object")
    adapter = d.get("type")
    if adapter not in ADAPTERS:
        raise StoreSpecError(f"adapter type {adapter!r}: lmckv fsck reads {', '.join(ADAPTERS)}")
    serde = parse_serde(d["serde"]) if d.get("serde") is not None else SerdeSpec("none")
    location: Location
    if adapter in FILE_ADAPTERS:
        base = _str(d, "base_path", required=True)
        assert base is not None
        location = FileLocation(Path(base), _str(d, "relative_tmp_dir"))
    elif adapter in REDIS_ADAPTERS:
        location = _redis_location(adapter, d)
    else:
        location = _s3_location(d)
    return StoreSpec(adapter, location, serde)


def from_target(target: str, endpoint: str | None = None) -> StoreSpec:
    """A short form: ``DIR`` (an fs store), ``redis://HOST:PORT[/DB]`` (a resp store),
    ``s3://BUCKET[/PREFIX]`` (an s3 store at ``endpoint``). The serde is detected from the
    content."""
    if target.startswith("redis://"):
        parts = urlsplit(target)
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise StoreSpecError(f"{target!r}: expected redis://HOST:PORT[/DB]")
        db_text = parts.path.strip("/") or "0"
        if not db_text.isdigit():
            raise StoreSpecError(f"{target!r}: the database is a number")
        location: Location = RedisLocation(
            parts.hostname, port, int(db_text), parts.username, parts.password
        )
        return StoreSpec("resp", location, None)
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        if not bucket:
            raise StoreSpecError(f"{target!r}: expected s3://BUCKET[/PREFIX]")
        return StoreSpec("s3", S3Location(bucket, endpoint, prefix=prefix.strip("/")), None)
    if endpoint is not None:
        raise StoreSpecError("--endpoint goes with an s3://BUCKET store")
    return StoreSpec("fs", FileLocation(Path(target)), None)
