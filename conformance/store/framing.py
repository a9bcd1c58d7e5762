"""What each serde's object holds, and what of it can be checked without LMCache (SPEC.md
"A store": STORE-SIZE, STORE-AESGCM-FRAME, STORE-AESGCM-TAG, the STORE-BLOB-* rules). The
frames' byte layouts are here; each serde's row in :mod:`.catalogue` reads them.

- ``none``: the memory object's bytes, no header, no checksum; ``fp8``: each element cast to
  e4m3 (one byte each), no header, no scale. Only the size can be checked: against the
  object's layout, given or learned from the store (:mod:`.sizes`).
- ``aesgcm``: ``0x01`` (the frame version), a 12-byte IV, the AES-GCM ciphertext (as long as
  the plaintext) and a 16-byte tag: plaintext + 29 bytes. The key of an object is derived as
  LMCache derives it: HKDF-SHA256 over every byte of the ``master_key_path`` file, no salt,
  info ``lmcache-l2-aesgcm-v1`` followed by the object's cache_salt in UTF-8, ``aes_bits / 8``
  bytes. With the key file, every tag is verified (a flipped bit is a failed tag); the frame
  binds no key name, so an object moved under another name of the same salt still verifies.
- ``lmckv``: one LMCKV blob (SPEC.md "Encoded KV blob"), checked by the reference reader in
  bounded memory.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

AESGCM_VERSION = 0x01
AESGCM_IV_BYTES = 12
AESGCM_TAG_BYTES = 16
#: HKDF's info is this, then the cache_salt (LMCache ``serde/key_provider.py``).
AESGCM_INFO_PREFIX = b"lmcache-l2-aesgcm-v1"
#: An LMCKV blob starts with these bytes (KV-MAGIC).
LMCKV_MAGIC = b"LMCKV"
#: The longest key file read (a master key is a few dozen bytes).
MAX_KEY_FILE_BYTES = 1 << 16


class KeyFileError(ValueError):
    """The aesgcm master key file cannot be used (the message is one line)."""


@dataclass
class AesGcmKeys:
    """The keys of one store, one per cache_salt, derived once each from the master key."""

    master: bytes
    bits: int = 128
    _keys: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: Path, bits: int) -> AesGcmKeys:
        """The master key is the file's bytes, all of them (a trailing newline included), as
        LMCache reads it."""
        try:
            # Without blocking: a FIFO or a device named as the key file is refused, not
            # waited on.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise KeyFileError(f"cannot read the key file {path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise KeyFileError(f"the key file {path} is not a regular file")
            try:
                master = f.read(MAX_KEY_FILE_BYTES + 1)
            except OSError as exc:
                raise KeyFileError(f"cannot read the key file {path}: {exc.strerror}") from None
        if not master or len(master) > MAX_KEY_FILE_BYTES:
            raise KeyFileError(f"the key file {path} is empty or longer than 64 KiB")
        return cls(master, bits)

    def key(self, cache_salt: str) -> bytes:
        found = self._keys.get(cache_salt)
        if found is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            info = AESGCM_INFO_PREFIX + cache_salt.encode("utf-8")
            kdf = HKDF(algorithm=hashes.SHA256(), length=self.bits // 8, salt=None, info=info)
            found = self._keys[cache_salt] = kdf.derive(self.master)
        return found


def aesgcm_tag_problem(frame: bytes, key: bytes) -> str | None:
    """STORE-AESGCM-TAG: None when the frame's tag verifies under ``key``."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = frame[1 : 1 + AESGCM_IV_BYTES]
    try:
        AESGCM(key).decrypt(iv, frame[1 + AESGCM_IV_BYTES :], None)
    except InvalidTag:
        return "the AES-GCM tag does not verify: the object is not what was written"
    return None
