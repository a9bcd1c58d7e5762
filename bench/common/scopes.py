"""The scale scopes the benchmarks measure, named by ``ScaleScope`` (the one vocabulary:
``reference_impl.kv_codec.header_fields``, SPEC.md "Scale scopes"), and the one benchmark
condition that is not a header scope.

Rows name a scope by its ``ScaleScope`` name (``PER_LAYER_HEAD``). ``CALIBRATED_EXTERNAL``
labels rows measured with calibrated external scales: the EXTERNAL scope, whose scale travels
out of band, set to a static per-layer scale taken from other windows of the same data (what a
deployment with calibration would store), instead of EXTERNAL's uncalibrated 1.0. The blob it
writes is an EXTERNAL blob.
"""

from __future__ import annotations

from ...reference_impl.kv_codec.header_fields import SCALE_AWARE_SCOPES, ScaleScope

#: Every scale-aware header scope's name, in ``ScaleScope`` order (NONE stores no scales:
#: nothing to measure).
SCOPE_NAMES: tuple[str, ...] = tuple(scope.name for scope in SCALE_AWARE_SCOPES)
#: The row label of the calibrated-external-scales condition (not a header scope).
CALIBRATED_EXTERNAL = f"{ScaleScope.EXTERNAL.name}_CALIBRATED"


def scope_rank(label: object) -> int:
    """Sort key putting row labels in ``ScaleScope`` order, anything else after them."""
    return SCOPE_NAMES.index(label) if label in SCOPE_NAMES else len(SCOPE_NAMES)


def header_scope(label: str) -> ScaleScope:
    """The header scope a row label is written with (``CALIBRATED_EXTERNAL`` is EXTERNAL);
    KeyError for a label that is neither."""
    return ScaleScope.EXTERNAL if label == CALIBRATED_EXTERNAL else ScaleScope[label]


def out_of_band(label: str) -> bool:
    """Whether a blob of this row holds no scales (EXTERNAL, calibrated or not)."""
    return label in (ScaleScope.EXTERNAL.name, CALIBRATED_EXTERNAL)
