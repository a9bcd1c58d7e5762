"""The JSON Schema of the testee messages, generated from the operations table.

``schemas/testee.schema.json`` (draft 2020-12, shipped as package data and validated by
``schemas.validate(document, "testee")``) describes one exchange of TESTEE.md's JSON-lines
protocol as it travels on the wire: an object holding the ``request`` line the suite wrote
and, when there was one, the ``reply`` line the testee answered. A transcript line
(``--transcript``) is such an object. The request is dispatched on its ``op`` to that
operation's request shape; the reply to the same operation's reply shape, or to the error
reply. Types follow wire.FIELD_TYPES: bytes and text are lowercase hex, lists of them
comma-joined hex.

The committed file is what :func:`generate` writes (tests/test_testee_operations.py checks);
after changing conformance/core/operations.py run
``python -m lmckv.conformance.core.testee_schema --write``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lmckv.base.resources import package_path
from lmckv.base.schemas import HEX_LIST_PATTERN, HEX_PATTERN

from .operations import (
    ERROR_FIELDS,
    HELLO_REPLY,
    TABLE,
    Operation,
    null_items,
    nullable,
)
from .wire import FIELD_TYPES, PROTOCOL_VERSION, FieldType

PATH = package_path("lmckv.base.schemas", "testee.schema.json")
#: JSON Schema of each wire type (TESTEE.md, "Field types").
TYPES: dict[str, dict[str, Any]] = {
    FieldType.INT.value: {"type": "integer"},
    FieldType.BOOL.value: {"type": "boolean"},
    FieldType.INTS.value: {"type": "array", "items": {"type": "integer"}},
    FieldType.BYTES.value: {"type": "string", "pattern": HEX_PATTERN},
    FieldType.TEXT.value: {"type": "string", "pattern": HEX_PATTERN},
    FieldType.BYTES_LIST.value: {"type": "string", "pattern": HEX_LIST_PATTERN},
    FieldType.TEXT_LIST.value: {"type": "string", "pattern": HEX_LIST_PATTERN},
    FieldType.NAME.value: {"type": "string"},
    FieldType.NAMES.value: {"type": "array", "items": {"type": "string"}},
}
#: A ``names`` list whose items may be null.
NAMES_OR_NULL = "names_or_null"


def _type_ref(op: Operation, name: str) -> dict[str, Any]:
    kind = FIELD_TYPES[name].value
    if kind == FieldType.NAMES.value and null_items(op, name):
        kind = NAMES_OR_NULL
    ref: dict[str, Any] = {"$ref": f"#/$defs/type.{kind}"}
    return {"anyOf": [ref, {"type": "null"}]} if nullable(op, name) else ref


def _object(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


def _request(op: Operation) -> dict[str, Any]:
    properties = {"id": {"$ref": "#/$defs/type.int"}, "op": {"const": op.name}}
    properties |= {name: _type_ref(op, name) for name in op.request}
    return {
        "description": f"A {op.name} request"
        + (f"; flags: {', '.join(op.flags)}" if op.flags else ""),
        **_object(["id", "op", *op.required], properties),
    }


def _reply(op: Operation) -> dict[str, Any]:
    properties = {"id": {"$ref": "#/$defs/type.int"}, "ok": {"const": True}}
    properties |= {name: _type_ref(op, name) for name in op.reply}
    return {
        "description": f"The reply to {op.name}: its fields, or the error reply",
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}},
        "if": {"properties": {"ok": {"const": True}}},
        "then": _object(["id", "ok", *op.reply], properties),
        "else": _error_reply(op) if op.on_error else {"$ref": "#/$defs/error_reply"},
    }


def _error_reply(op: Operation) -> dict[str, Any]:
    """The error reply of an operation whose failed replies carry more fields."""
    extra = {name: {"anyOf": [_type_ref(op, name), {"type": "null"}]} for name in op.on_error}
    return {
        "description": f"A failed {op.name}: the error reply and {', '.join(op.on_error)}",
        **_object(["id", "ok", ERROR_FIELDS[0]], {**ERROR_PROPERTIES, **extra}),
    }


#: The fields of every error reply (TESTEE.md, "Errors").
ERROR_PROPERTIES: dict[str, Any] = {
    "id": {"type": ["integer", "null"]},
    "ok": {"const": False},
    "error": {"type": "string"},
    "message": {"type": ["string", "null"]},
}


def _hello() -> tuple[dict[str, Any], dict[str, Any]]:
    request = _object(
        ["id", "op", "protocol"],
        {
            "id": {"$ref": "#/$defs/type.int"},
            "op": {"const": "hello"},
            "protocol": {"const": PROTOCOL_VERSION},
        },
    )
    reply = {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}},
        "if": {"properties": {"ok": {"const": True}}},
        "then": _object(
            ["id", "ok", *HELLO_REPLY],
            {
                "id": {"$ref": "#/$defs/type.int"},
                "ok": {"const": True},
                "name": {"type": "string", "pattern": "^[A-Za-z0-9-]+$"},
                "version": {"type": ["string", "null"]},
                "protocol": {"const": PROTOCOL_VERSION},
                "capabilities": {"$ref": "#/$defs/type.names"},
            },
        ),
        "else": {"$ref": "#/$defs/error_reply"},
    }
    return request, reply


def _dispatch(name: str) -> dict[str, Any]:
    """request.op == name -> request and reply follow that operation's shapes."""
    return {
        "if": {"properties": {"request": {"properties": {"op": {"const": name}}}}},
        "then": {
            "properties": {
                "request": {"$ref": f"#/$defs/request.{name}"},
                "reply": {"$ref": f"#/$defs/reply.{name}"},
            }
        },
    }


def generate() -> dict[str, Any]:
    """The schema document, from conformance/core/operations.py and wire.py."""
    defs: dict[str, Any] = {f"type.{name}": schema for name, schema in TYPES.items()}
    defs[f"type.{NAMES_OR_NULL}"] = {"type": "array", "items": {"type": ["string", "null"]}}
    defs["error_reply"] = {
        "description": "A failed operation: an error name (TESTEE.md, Errors) and a message",
        **_object(["id", "ok", ERROR_FIELDS[0]], ERROR_PROPERTIES),
    }
    defs["request.hello"], defs["reply.hello"] = _hello()
    for op in TABLE:
        defs[f"request.{op.name}"] = _request(op)
        defs[f"reply.{op.name}"] = _reply(op)
    names = ["hello", *(op.name for op in TABLE)]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:lmckv:schema:testee",
        "title": "lmckv testee exchange",
        "description": (
            "One exchange of the testee protocol (conformance/TESTEE.md, version "
            f"{PROTOCOL_VERSION}) as JSON lines on the wire: the request the suite wrote and "
            "the testee's reply. Generated from conformance/core/operations.py by "
            "conformance/core/testee_schema.py; do not edit."
        ),
        "type": "object",
        "required": ["request"],
        "properties": {
            "request": {
                "type": "object",
                "required": ["id", "op"],
                "properties": {"op": {"enum": names}},
            },
            "reply": {"type": "object"},
        },
        "allOf": [_dispatch(name) for name in names],
        "$defs": defs,
    }


def _cells(op: Operation, names: tuple[str, ...]) -> str:
    """Field names as TESTEE.md's table writes them: ``name`` (``name?`` when it may be
    null), comma-separated; ``-`` for none."""
    shown = [f"`{n}?`" if nullable(op, n) and n not in op.optional else f"`{n}`" for n in names]
    return ", ".join(shown) or "-"


def markdown_rows() -> list[str]:
    """TESTEE.md's operations table, one row per operation (tests hold the document to
    these rows)."""
    rows = []
    for op in TABLE:
        flags = ", ".join(f"`{flag}` ({_cells(op, names)})" for flag, names in op.flags.items())
        cells = [
            f"`{op.name}`",
            _cells(op, op.required),
            _cells(op, op.optional),
            _cells(op, op.reply),
            flags or "-",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def text() -> str:
    """The schema file's text: indented JSON, keys in the generator's order."""
    return json.dumps(generate(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``--write`` the schema file, or ``--check`` that it is up to date (exit 1 if not)."""
    parser = argparse.ArgumentParser(prog="python -m lmckv.conformance.core.testee_schema")
    parser.add_argument("--write", action="store_true", help="write schemas/testee.schema.json")
    args = parser.parse_args(argv)
    if args.write:
        PATH.write_text(text(), encoding="utf-8")
        print(f"wrote {PATH}")
        return 0
    if PATH.read_text(encoding="utf-8") != text():
        print(f"{PATH} differs from the operations table: run with --write", file=sys.stderr)
        return 1
    print(f"{PATH} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
