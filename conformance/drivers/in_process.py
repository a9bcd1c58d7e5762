"""The ``--impl`` values served by a driver in this process: ``reference``, ``upstream``
and ``python:PKG``."""

from __future__ import annotations

from lmckv.conformance.drivers.python_driver import PythonDriver, load_package


def load_in_process(spec: str) -> PythonDriver | None:
    """The driver ``spec`` names, or None when it names no in-process implementation;
    ImportError when the implementation cannot be imported."""
    if spec == "reference":
        return load_package("lmckv.reference_impl", name="reference")
    if spec == "upstream":
        from lmckv.conformance.drivers.upstream_driver import load_upstream

        return load_upstream()
    if spec.startswith("python:"):
        return load_package(spec.removeprefix("python:"))
    return None
