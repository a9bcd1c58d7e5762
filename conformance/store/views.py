"""Real stores seen from outside LMCache, as the tests that damage them need them: each view
lists its objects with their sizes, reads, writes and removes one by name, with the store's own
client (the file system, redis-py, boto3), never through LMCache's adapter code.

:func:`open_view` starts what a store of an adapter needs (a loopback ``redis-server`` for
``resp``, moto's S3 server for ``s3``, a folder for ``fs`` and ``fs_native``) inside the
caller's :class:`contextlib.ExitStack`, so that it is stopped on every way out, and gives the
store's fields of an ``--l2-adapter`` spec. A store that cannot be opened here (no
redis-server, no moto, no redis-py or boto3) is a :class:`StoreUnavailable` naming why.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import warnings
from pathlib import Path
from typing import Any

from .servers import (
    MotoS3Server,
    RedisServer,
    loopback_s3_endpoint,
    missing_moto,
    missing_redis_server,
)
from .spec import FILE_ADAPTERS

#: The most pages of an S3 listing read (the tests' stores hold a handful of objects).
MAX_LIST_PAGES = 10
#: The adapters :func:`open_view` can open.
VIEW_ADAPTERS = (*FILE_ADAPTERS, "resp", "s3")


class StoreUnavailable(RuntimeError):
    """A store that cannot be opened on this machine; the message says what is missing."""


class StoreView:
    """One store: its objects by name, read, written and removed from outside LMCache."""

    adapter: str
    #: The store's fields of the ``--l2-adapter`` spec LMCache is given.
    fields: dict[str, Any]
    #: The loopback port of the store's server (None for a folder).
    port: int | None = None

    def sizes(self) -> dict[str, int]:
        """Every entry's name and size."""
        raise NotImplementedError

    def get(self, name: str) -> bytes:
        """The bytes stored under ``name``."""
        raise NotImplementedError

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` under ``name``."""
        raise NotImplementedError

    def delete(self, name: str) -> None:
        """Remove ``name``."""
        raise NotImplementedError

    def with_port(self, port: int) -> dict[str, Any]:
        """The spec fields of this store reached through another loopback ``port`` (a proxy
        in front of its server)."""
        raise StoreUnavailable(f"a {self.adapter} store has no server to reach another way")


class FileView(StoreView):
    """A folder of an ``fs`` or ``fs_native`` store."""

    def __init__(self, adapter: str, base: Path) -> None:
        self.adapter, self.base = adapter, base
        base.mkdir(parents=True, exist_ok=True)
        self.fields = {"base_path": str(base)}

    def sizes(self) -> dict[str, int]:
        return {p.name: p.stat().st_size for p in self.base.iterdir() if p.is_file()}

    def get(self, name: str) -> bytes:
        return (self.base / name).read_bytes()

    def put(self, name: str, data: bytes) -> None:
        (self.base / name).write_bytes(data)

    def delete(self, name: str) -> None:
        (self.base / name).unlink()


class RedisView(StoreView):
    """A ``resp`` store: a loopback redis-server of its own."""

    adapter = "resp"

    def __init__(self, server: RedisServer) -> None:
        redis = import_client("redis", "redis-py (the store extra)")
        self.port = server.port
        self.client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=10)
        self.fields = {"host": "127.0.0.1", "port": server.port}

    def sizes(self) -> dict[str, int]:
        return {k.decode(): int(self.client.strlen(k)) for k in self.client.keys("*")}

    def get(self, name: str) -> bytes:
        data = self.client.get(name)
        if not isinstance(data, bytes):
            raise KeyError(name)
        return data

    def put(self, name: str, data: bytes) -> None:
        self.client.set(name, data)

    def delete(self, name: str) -> None:
        self.client.delete(name)

    def with_port(self, port: int) -> dict[str, Any]:
        return {**self.fields, "port": port}


class S3View(StoreView):
    """An ``s3`` store: bucket ``127`` of a loopback moto server of its own."""

    adapter = "s3"

    def __init__(self, server: MotoS3Server) -> None:
        boto3 = import_client("boto3", "boto3 (the store extra)")
        self.port = server.port
        self.bucket, endpoint = loopback_s3_endpoint(server.port)
        server.create_bucket(self.bucket)
        self.client = boto3.client(
            "s3", endpoint_url=server.url, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip
        self.fields = {
            "s3_endpoint": endpoint, "s3_region": "us-east-1", "disable_tls": True,
            "s3_prefer_http2": False, "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }  # fmt: skip

    def sizes(self) -> dict[str, int]:
        found: dict[str, int] = {}
        token: dict[str, str] = {}
        for _ in range(MAX_LIST_PAGES):
            page = self.client.list_objects_v2(Bucket=self.bucket, **token)
            found.update({o["Key"]: int(o["Size"]) for o in page.get("Contents", [])})
            if not page.get("IsTruncated"):
                return found
            token = {"ContinuationToken": page["NextContinuationToken"]}
        raise StoreUnavailable(f"more than {MAX_LIST_PAGES} pages in bucket {self.bucket}")

    def get(self, name: str) -> bytes:
        data: bytes = self.client.get_object(Bucket=self.bucket, Key=name)["Body"].read()
        return data

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=name, Body=data)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=name)

    def with_port(self, port: int) -> dict[str, Any]:
        return {**self.fields, "s3_endpoint": loopback_s3_endpoint(port)[1]}


def import_client(module: str, what: str) -> Any:
    """``module``, or :class:`StoreUnavailable` naming ``what``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module(module)
    except ImportError as exc:
        raise StoreUnavailable(f"{what} is not importable: {exc!r}") from None


def open_view(adapter: str, folder: Path, servers: contextlib.ExitStack) -> StoreView:
    """An empty store of ``adapter`` in ``folder`` (a server's working directory, or the
    store's own folder); its server, if any, stops when ``servers`` closes."""
    if adapter in FILE_ADAPTERS:
        return FileView(adapter, folder)
    if adapter == "resp":
        if why := missing_redis_server():
            raise StoreUnavailable(why)
        return RedisView(servers.enter_context(RedisServer(folder)))
    if adapter == "s3":
        if why := missing_moto():
            raise StoreUnavailable(why)
        return S3View(servers.enter_context(MotoS3Server(folder)))
    raise StoreUnavailable(f"no view of {adapter!r} stores (known: {', '.join(VIEW_ADAPTERS)})")


def l2_adapter_spec(adapter: str, fields: dict[str, Any], serde: str, master_key: Path) -> str:
    """The ``--l2-adapter`` JSON LMCache is given for a store of ``adapter`` with ``fields``
    and ``serde`` (none, fp8, or aesgcm keyed by the file ``master_key``); fsck takes the same."""
    serdes: dict[str, dict[str, Any]] = {
        "none": {},
        "fp8": {"serde": {"type": "fp8"}},
        "aesgcm": {"serde": {"type": "aesgcm", "master_key_path": str(master_key)}},
    }
    if serde not in serdes:
        raise ValueError(f"no spec for serde {serde!r} (known: {', '.join(serdes)})")
    return json.dumps({"type": adapter, **fields, **serdes[serde]})
