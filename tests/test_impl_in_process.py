"""The in-process kinds that testees load without the runner (drivers/in_process.py) are the
in-process rows of the ``--impl`` table (runner/impl_specs.py), the same objects."""

from __future__ import annotations

import pytest

from lmckv.conformance.drivers.base import DriverError
from lmckv.conformance.drivers.in_process import IN_PROCESS_KINDS, Where, load_in_process
from lmckv.conformance.drivers.python_driver import PythonDriver
from lmckv.conformance.runner import impl_specs


def test_the_in_process_kinds_are_the_tables_in_process_rows() -> None:
    in_table = [kind for kind in impl_specs.KINDS if kind.where is Where.IN_PROCESS]
    assert in_table == list(IN_PROCESS_KINDS)
    for kind in IN_PROCESS_KINDS:
        assert impl_specs.parse(kind.form.replace("PKG", "pkg")).kind is kind


def test_load_in_process_loads_the_reference() -> None:
    driver = load_in_process("reference")
    try:
        assert isinstance(driver, PythonDriver) and driver.name == "reference"
    finally:
        driver.close()


@pytest.mark.parametrize("text", ["exec:./x", "reference-server", "c", "bogus", "python:"])
def test_load_in_process_refuses_other_kinds(text: str) -> None:
    with pytest.raises(DriverError) as info:
        load_in_process(text)
    assert str(info.value).startswith(f"--impl {text!r}:")
