"""Every LMCache release against the golden vectors and against each other.

``nox -s upstream_versions`` installs each release of ``conformance/upstream_versions.txt``
into its own environment, runs the suite there (a results JSON per release), and then the
cross-release steps of :mod:`lmckv.conformance.releases.cross`: each release encodes the canonical
matrix inputs (``dump``), each release reads every release's blobs (``read``), and
``summary`` compares the encoded bytes across releases and gathers everything into
``releases.json`` for the report (``lmckv report ... --releases releases.json``).
"""

from __future__ import annotations

from lmckv.base.resources import package_path


def listed_versions() -> list[str]:
    """The releases of conformance/upstream_versions.txt, in file order (one a line)."""
    text = package_path("lmckv.conformance", "upstream_versions.txt").read_text(encoding="utf-8")
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
