"""Every negative codec vector is a minimal edit of a valid parent, and breaks its rule only.

Each invalid vector of golden_blobs/v1/codec.json names a valid ``parent`` and describes its
``edit``. These tests check the description against the bytes with the independent header
model (conformance/core/blob_model.py), not with the reference: the vector differs from its
parent only in the fields the edit names, its CRC matches its payload unless the edit says
it was changed, and its lengths add up to the buffer unless the rule is about lengths,
truncation or framing (or the edit is flagged as not isolated, with a note). So a reader
that does not check a vector's rule cannot pass the vector because of a broken CRC or a
payload that runs past the buffer.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest

from lmckv.conformance.core import blob_model as bl
from lmckv.conformance.core.digests import crc32
from lmckv.conformance.core.golden_vectors import golden_file, vectors

CODEC = vectors("codec")
BY_ID = {v["id"]: v for v in CODEC}
INVALID = [v for v in CODEC if v["result"] == "invalid"]
BLOB_INVALID = [v for v in INVALID if "blob" in v]
ENCODE_INVALID = [v for v in INVALID if "blob" not in v]

#: Rules whose subject is the buffer's extent: their vectors' lengths need not add up.
EXTENT_RULES = {"KV-LEN-SUM", "KV-TRUNCATED", "KV-TRAILING"}


def _blob(vec: dict[str, Any]) -> bytes:
    return golden_file(vec["blob"])


def _model_name(layout_name: str) -> str:
    """A blob_model.layout field name -> the blob_model.Header attribute it belongs to."""
    if layout_name.startswith("scale_shape["):
        return "scale_shape"
    if layout_name.startswith("hash["):
        return "hash_pairs"
    return layout_name


def _values(found: bl.Layout) -> dict[str, Any]:
    """Header attribute -> value, for a walk that reached the CRC."""
    out: dict[str, Any] = {}
    for f in found.fields:
        name = _model_name(f.name)
        if name in ("scale_shape", "hash_pairs"):
            out.setdefault(name, []).append((f.name, f.value))
        else:
            out[name] = f.value
    out.pop("scale_shape_n", None)  # implied by scale_shape
    if "hash_pairs" in out:
        out["hash_pairs"] = [v for _, v in out["hash_pairs"]]
    if out.get("hash_count") == len(out.get("hash_pairs", [])) // 4:
        del out["hash_count"]  # implied by the pairs (four fields each)
    return out


def _payload(blob: bytes, found: bl.Layout) -> bytes:
    assert found.header_len is not None
    return blob[found.header_len :]


def _changed_bytes_fields(parent: bytes, child: bytes) -> set[str]:
    """Same-length buffers: the parent's fields (header attribute names, or "payload")
    holding every byte that differs."""
    found = bl.layout(parent)
    assert found.header_len is not None
    touched: set[str] = set()
    for i, (a, b) in enumerate(zip(parent, child, strict=True)):
        if a == b:
            continue
        if i >= found.header_len:
            touched.add("payload")
            continue
        owner = next(f for f in found.fields if f.offset <= i < f.end)
        touched.add(_model_name(owner.name))
    return touched


def test_every_invalid_vector_has_a_valid_parent() -> None:
    for vec in INVALID:
        assert "parent" in vec and "edit" in vec, vec["id"]
        parent = BY_ID.get(vec["parent"])
        assert parent is not None, f"{vec['id']}: parent {vec['parent']} is not a vector"
        assert parent["result"] == "valid", f"{vec['id']}: parent {parent['id']} is invalid"


def test_not_isolated_vectors_say_so_in_their_comment() -> None:
    for vec in INVALID:
        if vec["edit"].get("isolated") is False:
            assert "NOT ISOLATED" in vec["comment"], vec["id"]
            assert vec["edit"]["note"], vec["id"]


@pytest.mark.parametrize("vec", BLOB_INVALID, ids=lambda v: v["id"])
def test_blob_vector_is_its_parents_bytes_but_the_named_edit(vec: dict[str, Any]) -> None:
    child, edit = _blob(vec), vec["edit"]
    parent_vec = BY_ID[vec["parent"]]
    parent = _blob(parent_vec)
    if "truncated_at" in edit:
        assert child == parent[: edit["truncated_at"]]
        assert len(child) < len(parent)
        return
    if "appended" in edit:
        assert child[: len(parent)] == parent
        assert len(child) == len(parent) + edit["appended"]
        return
    if "parse" in edit:
        assert child == parent, "a read-option edit keeps the blob"
        old = parent_vec["parse"].get("expected_hashes", {})
        new = vec["parse"].get("expected_hashes", {})
        changed = {f"expected_hashes.{k}" for k in {*old, *new} if old.get(k) != new.get(k)}
        assert changed == set(edit["parse"])
        return
    fields = set(edit["fields"])
    if fields == {"big_endian"}:
        parsed = bl.parse(parent)
        parsed.header.big_endian = True
        assert child == bl.pack(parsed.header, parsed.payload)
        return
    declared = fields | ({"crc"} if edit["crc"] != "kept" else set())
    declared |= {"payload"} if edit["payload"] == "changed" else set()
    p_found = bl.layout(parent)
    if len(child) == len(parent):
        touched = _changed_bytes_fields(parent, child)
        if "scale_shape_n" in fields or "hash_count" in fields:
            touched.discard("scale_shape")  # a count edit moves nothing in the parent frame
        assert touched == declared, f"bytes changed in {sorted(touched)}"
    else:
        c_found = bl.layout(child)
        assert c_found.header_len is not None, "a resized vector keeps a complete header"
        old, new = _values(p_found), _values(c_found)
        differ = {k for k in {*old, *new} if old.get(k) != new.get(k)}
        if _payload(parent, p_found) != _payload(child, c_found):
            differ.add("payload")
        assert differ == declared, f"fields changed: {sorted(differ)}"


@pytest.mark.parametrize("vec", BLOB_INVALID, ids=lambda v: v["id"])
def test_blob_vector_breaks_only_its_rule(vec: dict[str, Any]) -> None:
    """CRC right unless the edit changed it (KV-CRC), lengths adding up to the buffer unless
    the rule is about the extent or the edit shifts the frame or is flagged."""
    child, edit, rule = _blob(vec), vec["edit"], vec["rule"]
    if "truncated_at" in edit or "appended" in edit:
        assert rule in EXTENT_RULES, f"{rule} vectors do not cut or extend the buffer"
        return
    if "parse" in edit or edit.get("fields") == ["big_endian"]:
        return
    if edit.get("framing") == "shifted":
        # The count is the edit: in the parent's frame the CRC and lengths are intact.
        parent = _blob(BY_ID[vec["parent"]])
        assert len(child) == len(parent)
        return
    found = bl.layout(child)
    assert found.header_len is not None, "the header is whole"
    crc_ok = crc32(_payload(child, found)) == found.int_value("crc")
    if edit["crc"] == "changed" or (edit["crc"] == "kept" and edit["payload"] == "changed"):
        assert rule == "KV-CRC" and not crc_ok
    else:
        assert crc_ok, "the CRC must match the payload"
    lengths = [found.int_value(name) for name in bl.LENGTH_FIELDS]
    adds_up = found.header_len + sum(lengths) == len(child)
    if rule in EXTENT_RULES:
        return
    if edit.get("isolated") is False:
        assert not adds_up or rule != "KV-LEN", "a flagged vector needs a reason"
        return
    assert adds_up, f"lengths {lengths} after H={found.header_len} != {len(child)} bytes"


@pytest.mark.parametrize("vec", ENCODE_INVALID, ids=lambda v: v["id"])
def test_refused_encode_is_its_parents_inputs_but_the_named_ones(vec: dict[str, Any]) -> None:
    parent = BY_ID[vec["parent"]]
    assert "encode" in parent, "an encode refusal derives from an encode vector"
    old, new = parent["encode"], vec["encode"]
    changed = {k for k in {*old, *new} if old.get(k) != new.get(k)}
    assert changed == set(vec["edit"]["encode"])
    assert changed, "an edit changes something"


def test_rule_ids_in_alt_rules_are_distinct_from_the_rule() -> None:
    for vec in CODEC:
        for alt in vec.get("alt_rules", []):
            assert alt != vec["rule"] and re.fullmatch(r"[A-Z][A-Z0-9-]*", alt), vec["id"]


# -- protocol: hand-packed client messages edited from a valid one ---------------------------

CLIENT_FIELDS = (
    "command",
    "length",
    "fmt",
    "dtype",
    "location",
    "shape[0]",
    "shape[1]",
    "shape[2]",
    "shape[3]",
    "key",
)
PROTOCOL = vectors("protocol")
PROTO_BY_ID = {v["id"]: v for v in PROTOCOL}
PROTO_EDITED = [v for v in PROTOCOL if "parent" in v]


def _msg(vec: dict[str, Any]) -> bytes:
    return golden_file(vec["request"]["msg_file"])


def test_hand_packed_client_reads_name_a_parent() -> None:
    hand = [
        v
        for v in PROTOCOL
        if v["result"] == "invalid"
        and v["op"] == "proto.client.read"
        and "hand-packed" in v["flags"]
        and not v["id"].startswith("proto-typed-errors-")
    ]
    assert hand and all("parent" in v for v in hand)


@pytest.mark.parametrize("vec", PROTO_EDITED, ids=lambda v: v["id"])
def test_client_message_is_its_parent_but_the_named_fields(vec: dict[str, Any]) -> None:
    """SPEC.md, "ClientMetaMessage": nine little-endian int32 then a 150-byte key."""
    parent_vec = PROTO_BY_ID[vec["parent"]]
    assert parent_vec["result"] == "valid"
    parent, child, edit = _msg(parent_vec), _msg(vec), vec["edit"]
    if "truncated_at" in edit:
        assert child == parent[: edit["truncated_at"]]
        assert vec["rule"] == "PROTO-EXACT-LENGTH"
        return
    if "appended" in edit:
        assert child[: len(parent)] == parent and len(child) - len(parent) == edit["appended"]
        assert vec["rule"] == "PROTO-EXACT-LENGTH"
        return
    assert len(child) == len(parent) == 186, "a field edit keeps the length"
    if edit["fields"] == ["byte_order"]:
        ints = struct.unpack("<9i", parent[:36])
        assert child == struct.pack(">9i", *ints) + parent[36:]
        return
    old = dict(zip(CLIENT_FIELDS, struct.unpack("<9i150s", parent), strict=True))
    new = dict(zip(CLIENT_FIELDS, struct.unpack("<9i150s", child), strict=True))
    assert {k for k in CLIENT_FIELDS if old[k] != new[k]} == set(edit["fields"])
