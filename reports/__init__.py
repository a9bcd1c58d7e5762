"""lmckv report builder: bench JSONL and conformance results JSON to an HTML/PNG report.

Entry point: ``python -m reports RESULTS... --out DIR [--baseline BENCH.jsonl]``
(:func:`reports.cli.main`).
"""
