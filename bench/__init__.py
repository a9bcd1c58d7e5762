"""lmckv benchmarks: throughput and FP8-accuracy of the KV codec, with the limits beside them.

Measurement modules (``timing``, ``throughput``, ``accuracy``, ``realkv``) produce rows;
``results`` writes them as JSON Lines (format in ``bench/RESULTS.md``); ``compare`` and
``targets`` read results files back. ``cli.main`` is the entry point
(``lmckv bench run|compare|targets|gpu-check``).
"""
