"""Real stores seen from outside LMCache, as the tests that damage them need them: each view
lists its objects with their sizes, reads, writes and removes one by name, with its adapter's
one client (:mod:`.sources`: the file system, redis-py, boto3, the same clients fsck reads
with), never through LMCache's adapter code.

:func:`open_view` starts what a store of an adapter needs (its catalogue row's ``test_store``:
a loopback ``redis-server``, moto's S3 server, a folder) inside the caller's
:class:`contextlib.ExitStack`, so that it is stopped on every way out, and gives the store's
fields of an ``--l2-adapter`` spec. A store that cannot be opened here (no redis-server, no
moto, no redis-py or boto3) is a :class:`.servers.StoreUnavailable` naming why.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import catalogue
from .servers import StoreUnavailable
from .sources import Source, sizes
from .spec import from_l2_adapter, open_source


@dataclass
class StoreView:
    """One store: its objects by name, read, written and removed from outside LMCache."""

    adapter: str
    #: The store's fields of the ``--l2-adapter`` spec LMCache is given.
    fields: dict[str, Any]
    source: Source

    @property
    def row(self) -> catalogue.Adapter:
        return catalogue.adapter(self.adapter)

    def sizes(self) -> dict[str, int]:
        """Every entry's name and size."""
        return sizes(self.source)

    def get(self, name: str) -> bytes:
        """The bytes stored under ``name``."""
        return self.source.get(name)

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` under ``name``."""
        self.source.put(name, data)

    def delete(self, name: str) -> None:
        """Remove ``name``."""
        self.source.delete(name)

    def with_port(self, port: int) -> dict[str, Any]:
        """The spec fields of this store reached through another loopback ``port`` (a proxy
        in front of its server)."""
        server = self.row.server
        if server is None:
            raise StoreUnavailable(f"a {self.adapter} store has no server to reach another way")
        return server.via(self.fields, port)


def open_view(adapter: str, folder: Path, servers: contextlib.ExitStack) -> StoreView:
    """An empty store of ``adapter`` in ``folder`` (a server's working directory, or the
    store's own folder); its server, if any, stops when ``servers`` closes."""
    row = catalogue.adapter(adapter)
    if row.test_store is None:
        known = ", ".join(a.name for a in catalogue.adapters_here())
        raise StoreUnavailable(f"no test store of {adapter!r} here (known: {known})")
    fields = row.test_store(folder, servers)
    spec = from_l2_adapter(json.dumps({"type": adapter, **fields}))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            source = open_source(spec)
    except ImportError as exc:
        raise StoreUnavailable(f"the {adapter} store's client is not importable: {exc!r}") from None
    servers.callback(source.close)
    return StoreView(adapter, fields, source)
