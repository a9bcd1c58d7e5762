"""A blob file verified in bounded memory: the header, then the declared lengths against the
file's size, then the payload CRC in pieces (SPEC.md "Reader rules"; the store's rules,
STORE-BLOB-TRUNCATED and STORE-BLOB-VALID, apply it to every file of a store).

The checks are those of :func:`~lmckv.reference_impl.kv_codec.header.deserialize_header`,
strict (no trailing bytes), run by the same field parser; only the payload is never held
whole. Memory: the header (read in growing prefixes, at most :data:`MAX_HEADER_BYTES`)
and one :data:`CRC_PIECE` buffer, whatever the file's size.
"""

from __future__ import annotations

import os
import stat
from io import BufferedIOBase

from .checksum import crc_rule, crc_start, payload_crc32
from .errors import CodecError, CorruptEncodedKVError
from .header_fields import READ_VERSIONS, CodecVersion, HeaderFields, parse_header_fields

#: The first read: every header the reference writes with short hash strings fits.
FIRST_READ = 4096
#: The longest header this reader holds: far above any header a writer emits (six hash
#: pairs of at most 65535 bytes each need 393 KiB), short of what a hostile hash count
#: could declare (65535 pairs of 128 KiB).
MAX_HEADER_BYTES = 16 << 20
#: The payload is read and checksummed this many bytes at a time.
CRC_PIECE = 1 << 20


class TruncatedBlobError(CorruptEncodedKVError):
    """The file ends before the header does, or before the payload its header declares."""


class BlobFileLimitError(CodecError):
    """The header runs past :data:`MAX_HEADER_BYTES`: neither held nor checked (not a
    verdict on the blob)."""


def _read_exact(f: BufferedIOBase, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise TruncatedBlobError(
            f"the file changed while read: {len(data)} of {n} bytes", rule="KV-TRUNCATED"
        )
    return data


def _header(
    f: BufferedIOBase, size: int, versions: tuple[CodecVersion, ...]
) -> tuple[HeaderFields, int, int]:
    """Parse the header from the file's first bytes, reading more while it runs past them."""
    want = min(size, FIRST_READ)
    prefix = _read_exact(f, want)
    while True:
        try:
            return parse_header_fields(prefix, versions)
        except CorruptEncodedKVError as exc:
            if exc.rule != "KV-TRUNCATED":
                raise
            if len(prefix) == size:
                raise TruncatedBlobError(
                    f"the file ({size} bytes) ends inside the header: {exc}", rule="KV-TRUNCATED"
                ) from None
            if len(prefix) >= MAX_HEADER_BYTES:
                raise BlobFileLimitError(
                    f"header longer than {MAX_HEADER_BYTES} bytes: not checked"
                ) from None
        want = min(size, 2 * len(prefix), MAX_HEADER_BYTES)
        prefix += _read_exact(f, want - len(prefix))


def verify_blob_file(
    f: BufferedIOBase, size: int, versions: tuple[CodecVersion, ...] = READ_VERSIONS
) -> HeaderFields:
    """Verify the blob file ``f`` (positioned at its start, ``size`` bytes long) as
    ``deserialize_header`` verifies a buffer, strictly, reading the header ``versions``;
    returns its header fields with ``header_bytes`` set and no payload. Raises
    :class:`TruncatedBlobError` when the file is shorter than the header or than the
    lengths it declares (checked before any payload byte is read), CorruptEncodedKVError
    for every other reader rule."""
    enc, header_len, crc = _header(f, size, versions)
    end = header_len + enc.expected_payload_len()
    if end > size:
        raise TruncatedBlobError(
            f"payload truncated: header ends at {header_len}, {enc.expected_payload_len()} "
            f"payload bytes declared, the file holds {size}",
            rule="KV-LEN-SUM",
        )
    if end < size:
        raise CorruptEncodedKVError(f"{size - end} bytes follow the payload", rule="KV-TRAILING")
    f.seek(0)
    enc.header_bytes = _read_exact(f, header_len)
    computed = crc_start(enc.version, enc.header_bytes[:-4])
    left = enc.expected_payload_len()
    piece = memoryview(bytearray(min(CRC_PIECE, left)))  # one buffer, read into again and again
    while left:
        got = f.readinto(piece[: min(len(piece), left)])
        if not got:
            raise TruncatedBlobError(
                f"the file changed while read: it ends {left} bytes early", rule="KV-TRUNCATED"
            )
        computed = payload_crc32(piece[:got], computed)
        left -= got
    if computed != crc:
        raise CorruptEncodedKVError(
            f"CRC-32 mismatch: header says {crc:#010x}, the blob gives {computed:#010x}",
            rule=crc_rule(enc.version),
        )
    return enc


class BlobFileError(Exception):
    """The path cannot be checked: it cannot be opened or read, or it is not a regular
    file (a FIFO, a device, a directory: refused before anything is read)."""


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_blob_file(path: str | os.PathLike[str]) -> HeaderFields:
    """:func:`verify_blob_file` on the regular file at ``path``, opened without blocking
    (a FIFO does not hang the open) and refused unless ``fstat`` says it is a regular
    file. Raises BlobFileError when it cannot be checked, the errors of
    ``verify_blob_file`` otherwise (``lmckv inspect`` calls this)."""
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise BlobFileError(f"cannot read {name}: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise BlobFileError(f"{name}: {kind}, not a regular file; not read")
    with os.fdopen(fd, "rb") as f:
        try:
            return verify_blob_file(f, os.fstat(fd).st_size)
        except OSError as e:
            raise BlobFileError(f"cannot read {name}: {e.strerror or e}") from None
