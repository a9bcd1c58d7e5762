"""Where a store is: the fields of an ``--l2-adapter`` spec that locate an adapter's objects
(SPEC.md "A store"), read into a :class:`FileLocation`, :class:`RedisLocation` or
:class:`S3Location`. Each reader is named after the fields it reads; the catalogue's adapter
rows say which reader each adapter's spec takes (:mod:`.catalogue`).

Every refusal is a :class:`StoreSpecError` with one line saying what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class StoreSpecError(ValueError):
    """A store that cannot be named this way (the message is one line)."""


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


def without_password(url: str) -> str:
    """``url`` as it may be shown: a password in it (``redis://USER:PASSWORD@HOST``) is
    replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


def describe(location: Location) -> str:
    """Where the store is, in one line without secrets."""
    if isinstance(location, FileLocation):
        return str(location.base_path)
    if isinstance(location, RedisLocation):
        prefix = f" (key_prefix {location.key_prefix!r})" if location.key_prefix else ""
        return f"redis://{location.host}:{location.port}/{location.db}{prefix}"
    where = f"s3://{location.bucket}" + (f"/{location.prefix}" if location.prefix else "")
    endpoint = location.endpoint_url and without_password(location.endpoint_url)
    if endpoint and location.addressing == "virtual":  # the host the adapter connects to
        scheme, _, host = endpoint.partition("://")
        endpoint = f"{scheme}://{location.bucket}.{host}"
    return where + (f" at {endpoint}" if endpoint else "")


#: Fields of an adapter spec whose values are never shown, in an error or anywhere else.
SECRET_FIELDS = frozenset({"password", "aws_secret_access_key"})


def text_field(d: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    """``d[key]``: a non-empty string, or None when absent and not ``required``. The error
    for a wrong value shows it, except for :data:`SECRET_FIELDS`."""
    value = d.get(key)
    if value is None:
        if required:
            raise StoreSpecError(f"the adapter spec needs {key!r}")
        return None
    if not isinstance(value, str) or not value:
        got = f"a value of type {type(value).__name__}" if key in SECRET_FIELDS else repr(value)
        raise StoreSpecError(f"{key!r} must be a non-empty string, got {got}")
    return value


def _port(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise StoreSpecError(f"{where}: a port is an integer from 1 to 65535, got {value!r}")
    return value


def file_location(d: dict[str, Any]) -> FileLocation:
    """``base_path`` and the optional ``relative_tmp_dir``."""
    base = text_field(d, "base_path", required=True)
    assert base is not None
    return FileLocation(Path(base), text_field(d, "relative_tmp_dir"))


def host_port_location(d: dict[str, Any]) -> RedisLocation:
    """``host``, ``port`` and the optional ``username`` and ``password``."""
    server = text_field(d, "host", required=True)
    assert server is not None
    return RedisLocation(
        server, _port(d.get("port"), "port"), 0, text_field(d, "username"),
        text_field(d, "password"),
    )  # fmt: skip


def startup_nodes_location(d: dict[str, Any]) -> RedisLocation:
    """``startup_nodes`` (``HOST:PORT[,...]``: the first is read), the optional
    ``key_prefix``, ``username`` and ``password``; ``cluster_mode`` is refused."""
    if d.get("cluster_mode"):
        raise StoreSpecError("cluster_mode: lmckv fsck reads one server")
    nodes = text_field(d, "startup_nodes", required=True)
    assert nodes is not None
    host, sep, port = nodes.split(",")[0].strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise StoreSpecError(f"startup_nodes {nodes!r}: expected HOST:PORT[,HOST:PORT...]")
    prefix = text_field(d, "key_prefix") or ""
    if "@" in prefix:
        raise StoreSpecError(f"key_prefix {prefix!r} holds the separator '@'")
    return RedisLocation(
        host, _port(int(port), "startup_nodes"), 0, text_field(d, "username"),
        text_field(d, "password"), prefix,
    )  # fmt: skip


def s3_endpoint_location(d: dict[str, Any]) -> S3Location:
    """LMCache's ``s3_endpoint`` is ``BUCKET.HOST[:PORT]`` (or ``s3://BUCKET.HOST``): the
    bucket is the first label, and the adapter connects to the whole name."""
    endpoint = text_field(d, "s3_endpoint", required=True)
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
        text_field(d, "s3_region"),
        text_field(d, "aws_access_key_id"),
        text_field(d, "aws_secret_access_key"),
        addressing="virtual",  # the adapter connects to BUCKET.HOST itself
    )
