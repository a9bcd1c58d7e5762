"""What store ``lmckv fsck`` checks, and the ``--l2-adapter`` JSON LMCache is given: an L2
adapter's location and naming scheme, and the serde that framed its objects (SPEC.md "A
store"), each read through its catalogue row (:mod:`.catalogue`).

An operator names a store to LMCache with ``--l2-adapter SPEC``, a JSON object: its ``type``
(an adapter of the catalogue), the adapter's own fields and an optional ``"serde"`` object
(``{"type": NAME, ...}``, with ``master_key_path`` and ``aes_bits`` for a serde that needs a
key file). ``lmckv fsck --l2-adapter SPEC`` takes exactly that JSON; the short forms ``DIR``,
``redis://HOST:PORT[/DB]`` and ``s3://BUCKET`` (with ``--endpoint``) name the same stores
without a serde, which is then detected from the content.

Every refusal is a :class:`.locations.StoreSpecError` with one line saying what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, loads

from . import catalogue
from .locations import (
    FileLocation,
    Location,
    RedisLocation,
    S3Location,
    StoreSpecError,
    describe,
    text_field,
    without_password,
)
from .sources import Source

#: A spec longer than this is refused before it is parsed.
MAX_SPEC_BYTES = 64 * 1024
AES_BITS = (128, 256)


@dataclass(frozen=True)
class SerdeSpec:
    """The serde of a store's objects; for a serde with a key file, the file LMCache derives
    keys from."""

    type: str
    master_key_path: Path | None = None
    aes_bits: int = 128

    @property
    def row(self) -> catalogue.Serde:
        return catalogue.serde(self.type)


@dataclass(frozen=True)
class StoreSpec:
    """One store: the adapter that names its objects, where they are, and their serde (None:
    detect it from the content)."""

    adapter: str
    location: Location
    serde: SerdeSpec | None

    @property
    def row(self) -> catalogue.Adapter:
        return catalogue.adapter(self.adapter)

    @property
    def key_prefix(self) -> str:
        """valkey's ``key_prefix`` (every name starts ``<prefix>@``), else ""."""
        return self.location.key_prefix if isinstance(self.location, RedisLocation) else ""

    def describe(self) -> str:
        """Where the store is, in one line without secrets."""
        return describe(self.location)


def open_source(spec: StoreSpec) -> Source:
    """The client of ``spec``'s store (its adapter's row); StoreUnreachable when it cannot
    be listed."""
    return spec.row.client(spec.location)


def parse_serde(value: object) -> SerdeSpec:
    """The ``"serde"`` object of an adapter spec."""
    if not isinstance(value, dict):
        raise StoreSpecError(f'"serde" must be an object, got {value!r}')
    kind = value.get("type")
    row = catalogue.SERDES.get(kind) if isinstance(kind, str) else None
    if row is None or row is catalogue.NONE or not row.checkable:
        known = ", ".join(s for s in catalogue.checkable_serdes() if s != catalogue.NONE.name)
        raise StoreSpecError(f"serde type {kind!r}: lmckv fsck knows {known}")
    if not row.key_file:
        return SerdeSpec(row.name)
    bits = value.get("aes_bits", 128)
    if bits not in AES_BITS:
        raise StoreSpecError(f"aes_bits must be 128 or 256, got {bits!r}")
    key = text_field(value, "master_key_path")
    return SerdeSpec(row.name, Path(key) if key else None, bits)


def from_l2_adapter(text: str) -> StoreSpec:
    """The store an operator's ``--l2-adapter`` JSON names."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise StoreSpecError(f"the adapter spec is longer than {MAX_SPEC_BYTES} bytes")
    try:
        # no excerpt of a malformed spec: it may hold a password or a secret key
        limits = JSONLimits(max_bytes=MAX_SPEC_BYTES, excerpts=False)
        d = loads(text, limits, what="the adapter spec")
    except UntrustedJSONError as exc:
        raise StoreSpecError(f"the adapter spec is not JSON lmckv accepts: {exc}") from None
    if not isinstance(d, dict):
        raise StoreSpecError("the adapter spec must be a JSON object")
    kind = d.get("type")
    row = catalogue.ADAPTERS.get(kind) if isinstance(kind, str) else None
    if row is None:
        known = ", ".join(catalogue.ADAPTERS)
        raise StoreSpecError(f"adapter type {kind!r}: lmckv fsck reads {known}")
    given = d.get("serde")
    serde = parse_serde(given) if given is not None else SerdeSpec(catalogue.NONE.name)
    return StoreSpec(row.name, row.location(d), serde)


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
        shown = without_password(target)
        if not parts.hostname or port is None:
            raise StoreSpecError(f"{shown!r}: expected redis://HOST:PORT[/DB]")
        db_text = parts.path.strip("/") or "0"
        if not db_text.isdigit():
            raise StoreSpecError(f"{shown!r}: the database is a number")
        location: Location = RedisLocation(
            parts.hostname, port, int(db_text), parts.username, parts.password
        )
        return StoreSpec(catalogue.RESP.name, location, None)
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        if not bucket:
            raise StoreSpecError(f"{target!r}: expected s3://BUCKET[/PREFIX]")
        location = S3Location(bucket, endpoint, prefix=prefix.strip("/"))
        return StoreSpec(catalogue.S3.name, location, None)
    if endpoint is not None:
        raise StoreSpecError("--endpoint goes with an s3://BUCKET store")
    return StoreSpec(catalogue.FS.name, FileLocation(Path(target)), None)


def l2_adapter_spec(
    adapter: str, fields: dict[str, Any], serde: str, master_key: Path | None = None
) -> str:
    """The ``--l2-adapter`` JSON LMCache is given for a store of ``adapter`` with ``fields``
    and ``serde`` (keyed by the file ``master_key`` where it needs one); fsck takes the same."""
    row = catalogue.serde(serde)
    chosen = row.l2_object(master_key)
    return json.dumps({"type": adapter, **fields, **({"serde": chosen} if chosen else {})})
