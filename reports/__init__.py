"""lmckv report builder: bench JSONL and conformance results JSON to an HTML/PNG report.

Entry point: ``lmckv report RESULTS... --out DIR [--baseline BENCH.jsonl]``
(:func:`reports.cli.main`).
"""
