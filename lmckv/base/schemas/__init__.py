"""JSON Schemas of lmckv's output formats and of the testee messages, and one validator for
all of them.

``vectors`` (golden_blobs/v1/*.json manifests), ``results`` (the conformance results file),
``bench-row`` (one line of a bench-*.jsonl file) and ``fsck`` (``lmckv fsck --json``) live
as draft 2020-12 schema files in ``lmckv/base/schemas/`` and are loaded as package
data. Each carries its format's version as a ``const``; the constants below are read from
there, so a version lives in one place. ``testee`` (one request/reply exchange of TESTEE.md)
is generated from the operations table by conformance/core/testee_schema.py. Imports
nothing else of lmckv (see SCHEMAS.md).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Any, cast

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

#: The schema names ``validate`` accepts (file ``schemas/<name>.schema.json``).
SCHEMA_NAMES = ("vectors", "results", "bench-row", "testee", "fsck")

_TYPE_WORDS = {
    "number": "numeric",
    "integer": "an integer",
    "string": "a string",
    "boolean": "a boolean",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


class SchemaError(ValueError):
    """A document that does not follow its schema.

    ``schema`` is the schema name, ``path`` the JSON path of the offending value (``$`` is
    the document), ``problem`` what is wrong there and ``location`` (optional) the file or
    ``file:line`` the document came from; ``str()`` says them all.
    """

    def __init__(self, schema: str, path: str, problem: str, *, location: str = "") -> None:
        prefix = f"{location}: " if location else ""
        super().__init__(f"{prefix}{schema}.schema.json at {path}: {problem}")
        self.schema = schema
        self.path = path
        self.problem = problem
        self.location = location

    def at(self, location: str) -> SchemaError:
        """The same error, said of ``location`` (a file, or ``file:line``)."""
        return SchemaError(self.schema, self.path, self.problem, location=location)


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The parsed schema ``name`` (one of SCHEMA_NAMES); cached."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r}; expected one of {SCHEMA_NAMES}")
    text = resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


#: The wire form of bytes and text (TESTEE.md, "Field types"): lowercase hex, two digits a
#: byte; a list of them is joined by commas.
HEX_PATTERN = "^([0-9a-f]{2})*$"
HEX_LIST_PATTERN = "^(([0-9a-f]{2})*(,([0-9a-f]{2})*)*)?$"
_HEX_DIGITS = b"0123456789abcdef"


def _is_hex(text: str) -> bool:
    """Whether ``text`` matches HEX_PATTERN, in one C pass (a regex with a repeated group
    takes ~0.1 s a MiB of hex, and the suite's exchanges carry many MiB)."""
    return (
        len(text) % 2 == 0
        and text.isascii()
        and not text.encode("ascii").translate(None, _HEX_DIGITS)
    )


#: Patterns the schemas use on large strings, each with a predicate that decides exactly
#: what the pattern does under ECMA-262 semantics (``$`` is the end of the string).
FAST_PATTERNS: dict[str, Callable[[str], bool]] = {
    HEX_PATTERN: _is_hex,
    HEX_LIST_PATTERN: lambda text: all(_is_hex(part) for part in text.split(",")),
}


def _pattern(
    validator: Any, pattern: str, instance: Any, _schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """The ``pattern`` keyword, through FAST_PATTERNS where the pattern is one of them."""
    if not validator.is_type(instance, "string"):
        return
    fast = FAST_PATTERNS.get(pattern)
    if not (fast(instance) if fast else re.search(pattern, instance)):
        shown = instance if len(instance) <= 80 else f"{instance[:77]}..."
        yield ValidationError(f"{shown!r} does not match {pattern!r}")


#: Draft 2020-12, with tuples taken as arrays (``json.dumps`` writes them as arrays, and
#: writers validate what they are about to dump) and FAST_PATTERNS.
_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "array", lambda _checker, instance: isinstance(instance, (list, tuple))
    ),
)


@functools.cache
def _validator(name: str) -> Any:
    document = schema(name)
    Draft202012Validator.check_schema(document)
    return _Validator(document)


def json_path(parts: Iterable[Any]) -> str:
    """``$.a[0].b`` from a sequence of keys and indices."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _non_finite(value: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """Where ``value`` holds a NaN or an infinity (JSON has neither), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, (*path, key))
        if found is not None:
            return found
    return None


def _problem(error: ValidationError) -> str:
    """A short sentence for ``error`` (all missing fields of its object when it is one)."""
    field = error.path[-1] if error.path else None
    if error.validator == "required" and isinstance(error.instance, dict):
        required: list[str] = list(cast(list[str], error.validator_value))
        missing = [str(f) for f in required if f not in error.instance]
        return f"missing field(s) {', '.join(missing)}"
    if error.validator == "type" and field is not None:
        types = cast(str | list[str], error.validator_value)
        words = " or ".join(
            _TYPE_WORDS.get(t, t) for t in ([types] if isinstance(types, str) else types)
        )
        return f"{field!r} must be {words} (got {error.instance!r})"
    if error.validator == "const" and field is not None:
        return f"{field} {error.instance!r}, expected {error.validator_value!r}"
    if error.validator == "enum" and field is not None:
        name = (
            str(error.schema.get("title", field)).lower()
            if isinstance(error.schema, dict)
            else field
        )
        return f"unknown {name} {error.instance!r} (expected one of {error.validator_value!r})"
    return str(error.message)


def validate(document: Any, schema_name: str) -> None:
    """Raise :class:`SchemaError` unless ``document`` follows schema ``schema_name``.

    The error names the schema, the JSON path and the problem (the most relevant error,
    per ``jsonschema.exceptions.best_match``). NaN and infinities are rejected wherever
    they occur, as JSON cannot hold them.
    """
    errors = list(_validator(schema_name).iter_errors(document))
    if errors:
        error = best_match(errors)
        assert error is not None
        raise SchemaError(schema_name, json_path(error.absolute_path), _problem(error))
    where = _non_finite(document)
    if where is not None:
        raise SchemaError(schema_name, json_path(where), "NaN or infinity (not JSON)")


def version_const(schema_name: str, field: str) -> int:
    """The ``const`` a schema puts on its top-level version field ``field``."""
    document = schema(schema_name)
    node = document["properties"].get(field) or document["$defs"]["header"]["properties"][field]
    value: int = node["const"]
    return value


#: Version of the golden-vector manifests (``format_version``).
VECTORS_VERSION = version_const("vectors", "format_version")
#: Version of the conformance results file (``schema_version``).
RESULTS_VERSION = version_const("results", "schema_version")
#: Version of the bench results format (the header's ``schema_version``).
BENCH_SCHEMA_VERSION = version_const("bench-row", "schema_version")


def bench_kinds() -> tuple[str, ...]:
    """The bench record kinds the schema defines, header first."""
    return tuple(schema("bench-row")["properties"]["kind"]["enum"])


def bench_fields(kind: str) -> tuple[str, ...]:
    """The fields every ``kind`` record carries (the schema's ``required``, less ``kind``)."""
    required = schema("bench-row")["$defs"][kind]["required"]
    return tuple(f for f in required if f != "kind")


def results_fields(list_name: str) -> tuple[str, ...]:
    """The fields of each item of the results file's list ``list_name`` (impls, tests, ...)."""
    document = schema("results")
    ref = document["properties"][list_name]["items"]["$ref"]
    return tuple(document["$defs"][ref.rsplit("/", 1)[1]]["required"])


def results_lists() -> tuple[str, ...]:
    """The lists of a results file, in schema order (impls, rules, tests, summary, matrix)."""
    props = schema("results")["properties"]
    return tuple(k for k, v in props.items() if v.get("type") == "array")


def enum(schema_name: str, *pointer: str) -> tuple[Any, ...]:
    """The ``enum`` of the node at ``pointer`` (keys from the schema's root)."""
    node: Any = schema(schema_name)
    for key in pointer:
        node = node[key]
    return tuple(node["enum"])
