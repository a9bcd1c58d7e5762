"""How each L2 adapter names an object, read back (SPEC.md "A store", STORE-NAME).

- ``fs`` and ``fs_native``: a file ``<model, / as -SEP->@0x<kv_rank 08x>@<group x>@<hash
  hex>[@salt].data`` in ``base_path`` (KEY-FS-FORM), written first as ``<same>.tmp`` (or into
  ``relative_tmp_dir``) and renamed into place;
- ``resp`` and ``s3``: the key ``<model>@<kv_rank 08x>@<group x>@<hash hex>[@salt]``
  (KEY-STRING-FORM); ``valkey``: the same after ``<key_prefix>@`` when a prefix is set.

A name is an object's when it reads back to an ObjectKey whose name, written again, is the
same string: a name two keys could share, or one no key writes, is no object's.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from lmckv.base.untrusted_text import shown

from ...reference_impl.keys import (
    KeyFormatError,
    ObjectKey,
    object_key_to_filename,
    object_key_to_string,
    parse_object_key_filename,
    string_to_object_key,
)
from ...reference_impl.keys.fs_form import FILE_EXT

#: The suffix fs and fs_native write a file under before renaming it (an unfinished write).
TEMP_SUFFIX = ".tmp"
#: Files newer upstream FS adapters keep beside the objects (the disk identity and its lock).
ADAPTER_FILES = frozenset({".lmcache_disk_uuid", ".lmcache_disk_uuid.lock"})


class NameForm(Enum):
    """How an adapter names an object, by the rule that states the form (each adapter's
    catalogue row says which)."""

    FILE = "KEY-FS-FORM"
    STRING = "KEY-STRING-FORM"

    @property
    def rule(self) -> str:
        return self.value

    def name_of(self, key: ObjectKey, key_prefix: str = "") -> str:
        """The name ``key``'s object has in this form (after ``<key_prefix>@``, if any)."""
        if self is NameForm.FILE:
            return object_key_to_filename(key)
        name = object_key_to_string(key)
        return f"{key_prefix}@{name}" if key_prefix else name


def key_of(form: NameForm, name: str, key_prefix: str = "") -> tuple[ObjectKey | None, str]:
    """The ObjectKey ``name`` is the name of in ``form``, else (None, why)."""
    read: Callable[[str], ObjectKey] = parse_object_key_filename
    write: Callable[[ObjectKey], str] = object_key_to_filename
    if form is NameForm.STRING:
        read, write = string_to_object_key, object_key_to_string
        if key_prefix:
            head, sep, name = name.partition("@")
            if not sep or head != key_prefix:
                return None, f"does not start with the key prefix {key_prefix + '@'!r}"
    try:
        key = read(name)
    except KeyFormatError as exc:
        return None, f"not the name of an ObjectKey: {exc}"
    try:
        again = write(key)
    except KeyFormatError as exc:
        return None, f"reads back to a key that has no name: {exc}"
    if again != name:
        return None, f"reads back to a key whose name is {shown(again)}"
    return key, ""


def is_object_file(name: str) -> bool:
    """Whether a file in an fs store's directory is named like an object (``.data``)."""
    return name.endswith(FILE_EXT)
