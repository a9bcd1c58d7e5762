"""The shared base every part of lmckv stands on: the JSON Schemas of its files
(``schemas``), the data files it ships (``resources``), the process groups of the children it
starts (``process_groups``) and the installed LMCache release (``lmcache_release``).

It imports nothing else of lmckv: the suite (``lmckv.conformance``), the benchmarks
(``lmckv.bench``) and the report (``lmckv.reports``) import it, never each other's internals
for these (tests/test_import_graph.py holds both).
"""
