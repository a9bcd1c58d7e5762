"""A store written by the installed lmcache reads back through its own filename reader and
deserializers (what ``nox -s upstream_versions`` does across releases)."""

from __future__ import annotations

from pathlib import Path

import pytest
from upstream_required import upstream_missing

from lmckv.conformance.store import writers


def test_a_release_reads_its_own_store_and_notices_damage(tmp_path: Path) -> None:
    try:
        from lmckv.conformance.store.readers import UpstreamStoreReader

        reader = UpstreamStoreReader()
        chosen = writers.writer(writers.UpstreamAdapterWriter.name)
    except ImportError as exc:
        upstream_missing(f"lmcache is not installed: {exc}")
    chunks = writers.plan(1)
    writers.write_store(tmp_path, chunks, writers.SMALL_CHUNK, chosen)
    verdicts = reader.read_store(tmp_path, chunks, writers.SMALL_CHUNK)
    assert len(verdicts) == len(chunks) and set(verdicts.values()) == {"pass"}
    full = next(c for c in chunks if not c.k_less)
    name = next(n for n in verdicts if full.chunk_hash.hex() in n)
    data = bytearray((tmp_path / name).read_bytes())
    data[-100] ^= 0xFF  # a byte of V, under an unchanged CRC
    (tmp_path / name).write_bytes(bytes(data))
    (tmp_path / "stray.data").write_bytes(b"x")
    after = reader.read_store(tmp_path, chunks, writers.SMALL_CHUNK)
    assert after[name].startswith("fail: ")
    assert after["stray.data"] == "fail: the release reads no key from the name"


@pytest.mark.parametrize(("error", "close"), [(0.0, True), (0.5, False)])
def test_v_close_is_fp8_sized(error: float, close: bool) -> None:
    import torch

    from lmckv.conformance.store.readers import v_close

    want = torch.linspace(-4, 4, 64)
    assert v_close(want * (1 + error), want) is close
