"""Builder for operation vectors (protocol and keys): one driver operation, its request,
and the reference's result or error family.

Message bytes go to binary files (``<format>/<id>.bin``); every other value is written into
the manifest (bytes as hex, text as JSON strings; see ``wire.to_manifest``).
"""

from __future__ import annotations

from typing import Any

from ..core.digests import sha256
from ..core.error_names import family_of
from ..core.wire import to_manifest
from ..drivers.python_driver import PythonDriver
from .common import FileSet, GenerationError

#: Request and result fields stored as files rather than inline.
FILE_FIELDS = ("msg",)


def rule_prefixed(rule: str, vid: str) -> str:
    """``PROTO-FMT-ID``, ``proto-client-read-fmt-9`` -> ``proto-fmt-id-client-read-fmt-9``."""
    prefix = rule.lower()
    if vid.startswith(prefix + "-"):
        return vid
    return f"{prefix}-{vid.split('-', 1)[1]}"


class OpVectors:
    """Accumulates the vectors of one format (``protocol`` or ``keys``)."""

    def __init__(self, files: FileSet, fmt: str, driver: PythonDriver) -> None:
        self.files = files
        self.fmt = fmt
        self.driver = driver
        self.vectors: list[dict[str, Any]] = []

    def _store(self, vid: str, suffix: str, fields: dict[str, Any]) -> dict[str, Any]:
        out = to_manifest({k: v for k, v in fields.items() if k not in FILE_FIELDS})
        for name in FILE_FIELDS:
            if name in fields:
                path = self.files.add(f"v1/{self.fmt}/{vid}{suffix}.bin", fields[name])
                out[f"{name}_file"] = path
                out[f"{name}_sha256"] = sha256(fields[name])
        return out

    def add(
        self,
        vid: str,
        rule: str,
        comment: str,
        op: str,
        request: dict[str, Any],
        *,
        result: str = "valid",
        flags: list[str] | None = None,
        error: str | None = None,
        parent: str | None = None,
        edit: dict[str, Any] | None = None,
        alt_rules: list[str] | None = None,
    ) -> dict[str, Any]:
        """One vector; ``error`` is the expected family for invalid ones. Returns the
        reference's result. An invalid vector's id starts with the rule it breaks."""
        if result == "invalid":
            vid = rule_prefixed(rule, vid)
        got = self.driver.call(op, **request)
        if result == "valid" and not got["ok"]:
            raise GenerationError(f"{vid}: reference rejects a valid vector: {got}")
        if result == "invalid" and (got["ok"] or family_of(got["error"]) != error):
            raise GenerationError(f"{vid}: reference gives {got}, vector expects {error}")
        vec: dict[str, Any] = {
            "id": vid,
            "rule": rule,
            "comment": comment,
            "flags": sorted(set(flags or [])),
            "result": result,
            "op": op,
            "request": self._store(vid, "", request),
        }
        if parent is not None:
            vec["parent"] = parent
            vec["edit"] = edit
        if alt_rules:
            vec["alt_rules"] = sorted(alt_rules)
        if got["ok"]:
            fields = {k: v for k, v in got.items() if k != "ok"}
            vec["expected"] = {"fields": self._store(vid, ".out", fields)}
        else:
            vec["expected"] = {"error": error, "error_class": got["error"]}
        self.vectors.append(vec)
        return got

    def add_distinct(
        self,
        vid: str,
        rule: str,
        comment: str,
        op: str,
        requests: list[dict[str, Any]],
        output: str,
        flags: list[str],
    ) -> None:
        """Writing each request must either be refused or give pairwise distinct
        ``output`` values: two keys never share one name. The id starts with the rule."""
        vid = rule_prefixed(rule, vid)
        outs = [self.driver.call(op, **r) for r in requests]
        names = [o[output] for o in outs if o["ok"]]
        if len(set(names)) != len(names):
            raise GenerationError(f"{vid}: the reference writes colliding names {names}")
        self.vectors.append(
            {
                "id": vid,
                "rule": rule,
                "comment": comment,
                "flags": sorted(set(flags)),
                "result": "valid",
                "op": op,
                "requests": [to_manifest(r) for r in requests],
                "expected": {"distinct": output},
            }
        )
