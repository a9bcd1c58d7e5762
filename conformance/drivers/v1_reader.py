"""``--impl reference-v1``: the reference's codec reader in its v1-only mode.

The reference reads v1 and v2 blobs; told to read version 1 only (``from_bytes(...,
versions=(CodecVersion.V1,))``) it is a v1 reader, which must refuse every v2 blob with its
typed error (SPEC.md, **KV-VERSION**). This driver declares the codec reading operations
only, without ``codec.v2``: the compatibility matrix then holds it to the v1 reader's
outcome on every v2 vector. Writing and everything else is the reference's own, run once
under ``--impl reference``.
"""

from __future__ import annotations

from typing import Any

from .python_driver import PythonDriver, load_package

#: The operations and flags a v1 reader declares: reading blobs, nothing else.
READER_CAPABILITIES = ("codec.parse", "codec.hash_gate", "codec.decode", "codec.dequant")


class V1ReaderDriver(PythonDriver):
    """A PythonDriver whose codec reads header version 1 only."""

    def _probe_capabilities(self) -> list[str]:
        return [c for c in super()._probe_capabilities() if c in READER_CAPABILITIES]

    def _from_bytes(self, blob: bytes, allow_trailing: bool, hashes: Any = None) -> Any:
        codec = self._codec()
        kwargs: dict[str, Any] = {"versions": (self.kv_codec.CodecVersion.V1,)}
        if hashes is not None:
            kwargs["expected_hashes"] = hashes
        if allow_trailing:
            kwargs["allow_trailing"] = True
        return codec.from_bytes(blob, **kwargs)


def reference_v1() -> V1ReaderDriver:
    """The reference's modules behind a v1-only reader."""
    ref = load_package("lmckv.reference_impl", name="reference-v1")
    return V1ReaderDriver(
        "reference-v1",
        ref.kv_codec,
        ref.protocol,
        ref.keys,
        kind=ref.info.kind,
        version=ref.info.version,
    )
