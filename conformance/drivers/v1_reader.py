"""``--impl reference-v1``: the reference's codec reader in its v1-only mode.

The reference reads v1 and v2 blobs; told to read version 1 only (``from_bytes(...,
versions=(CodecVersion.V1,))``) it is a v1 reader, which must refuse every v2 blob with its
typed error (SPEC.md, **KV-VERSION**). :class:`V1ReaderDriver` is the reference with that
reader, declaring everything but ``codec.v2`` (the fuzzer compares the C testee, a v1
reader, with it); :class:`ReferenceV1Driver`, ``--impl reference-v1``, declares the codec
reading operations only: the compatibility matrix holds it to the v1 reader's outcome on
every v2 vector, and writing and everything else is the reference's own, run once under
``--impl reference``.
"""

from __future__ import annotations

from typing import Any

from .python_driver import PythonDriver, load_package

#: The operations and flags a v1 reader declares: reading blobs, nothing else.
READER_CAPABILITIES = ("codec.parse", "codec.hash_gate", "codec.decode", "codec.dequant")


class V1ReaderDriver(PythonDriver):
    """A PythonDriver whose codec reads header version 1 only (no ``codec.v2``)."""

    def _probe_capabilities(self) -> list[str]:
        return [c for c in super()._probe_capabilities() if c != "codec.v2"]

    def _from_bytes(self, blob: bytes, allow_trailing: bool, hashes: Any = None) -> Any:
        codec = self._codec()
        kwargs: dict[str, Any] = {"versions": (self.kv_codec.CodecVersion.V1,)}
        if hashes is not None:
            kwargs["expected_hashes"] = hashes
        if allow_trailing:
            kwargs["allow_trailing"] = True
        return codec.from_bytes(blob, **kwargs)


class ReferenceV1Driver(V1ReaderDriver):
    """``--impl reference-v1``: the v1-only reader, declaring the reading operations only."""

    def _probe_capabilities(self) -> list[str]:
        return [c for c in super()._probe_capabilities() if c in READER_CAPABILITIES]


def v1_reader(name: str, driver: type[V1ReaderDriver] = V1ReaderDriver) -> V1ReaderDriver:
    """The reference's modules behind a v1-only reader, as ``driver``."""
    ref = load_package("lmckv.reference_impl", name=name)
    return driver(
        name,
        ref.kv_codec,
        ref.protocol,
        ref.keys,
        kind=ref.info.kind,
        version=ref.info.version,
        serde=ref.serde,
    )


def reference_v1() -> V1ReaderDriver:
    """``--impl reference-v1``."""
    return v1_reader("reference-v1", ReferenceV1Driver)
