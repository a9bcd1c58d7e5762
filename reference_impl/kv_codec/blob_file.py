"""A blob file checked as a stream: the header first, the declared lengths against the
file's size before any payload byte is read, then the CRC in pieces (SPEC "Blob files").

Memory stays bounded whatever the file claims or holds: at most the header (up to
:data:`HEADER_READ_LIMIT` bytes) and one :data:`CRC_PIECE` of payload are held at once. Only
regular files are read; a FIFO, a device or a directory is refused before anything is read.
The validation rules are the in-memory reader's (``header.read_header``, ``check_extent``,
``check_crc``); only how the bytes are fetched differs. ``lmckv inspect`` and ``lmckv fsck``
call :func:`check_blob_file`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from lmckv.reference_impl.kv_codec.checksum import payload_crc32
from lmckv.reference_impl.kv_codec.errors import CorruptEncodedKVError
from lmckv.reference_impl.kv_codec.header import (
    EncodedKV,
    check_crc,
    check_extent,
    read_header,
)

#: The longest header read (the format allows up to 65535 hash pairs of 64 KiB strings;
#: no writer emits more than a few KiB). A longer one is refused, not read.
HEADER_READ_LIMIT = 16 << 20
#: The first read of a header, grown fourfold while the header is longer.
FIRST_READ = 4096
#: Payload bytes read (and checksummed) at once.
CRC_PIECE = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class BlobFileError(Exception):
    """The file cannot be checked: it cannot be opened or read, it is not a regular file,
    or its header is longer than HEADER_READ_LIMIT. (A file that is read and is not a
    valid blob raises CorruptEncodedKVError instead.)"""


@dataclass(frozen=True)
class BlobFile:
    """A checked blob file: its header fields (``enc.payload`` is empty; the payload
    stays on disk), and where the payload starts and ends."""

    enc: EncodedKV
    header_len: int
    size: int


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _pread_exact(fd: int, n: int, offset: int, path: str) -> bytes:
    data = os.pread(fd, n, offset)
    if len(data) != n:
        raise BlobFileError(f"{path}: the file changed while read ({len(data)} of {n} bytes)")
    return data


def _header(fd: int, size: int, path: str) -> tuple[EncodedKV, int, int, bytes]:
    """Read and check the header, reading more only while it is cut short."""
    want = min(size, FIRST_READ)
    while True:
        prefix = _pread_exact(fd, want, 0, path)
        try:
            enc, header_len, crc = read_header(memoryview(prefix))
        except CorruptEncodedKVError as e:
            if e.rule != "KV-TRUNCATED" or want >= size:
                raise
            if want >= HEADER_READ_LIMIT:
                raise BlobFileError(
                    f"{path}: the header is longer than this reader's limit of "
                    f"{HEADER_READ_LIMIT} bytes (HEADER_READ_LIMIT); not read further"
                ) from None
            want = min(size, want * 4, HEADER_READ_LIMIT)
            continue
        return enc, header_len, crc, prefix[:header_len]


def check_blob_file(path: str | os.PathLike[str]) -> BlobFile:
    """Check the blob in the regular file ``path`` by the reader rules, reading it in
    bounded pieces. Raises CorruptEncodedKVError (the rule broken) for an invalid blob
    and BlobFileError when the file cannot be checked."""
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise BlobFileError(f"cannot read {name}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BlobFileError(f"{name}: {_kind(st.st_mode)}, not a regular file; not read")
        size = st.st_size
        try:
            enc, header_len, crc, header = _header(fd, size, name)
            end = check_extent(header_len, enc.expected_payload_len(), size, False)
            computed = 0
            for offset in range(header_len, end, CRC_PIECE):
                piece = _pread_exact(fd, min(CRC_PIECE, end - offset), offset, name)
                computed = payload_crc32(piece, computed)
        except OSError as e:
            raise BlobFileError(f"cannot read {name}: {e.strerror or e}") from None
        check_crc(crc, computed)
        enc.header_bytes = header
        return BlobFile(enc, header_len, size)
    finally:
        os.close(fd)
