"""lmckv benchmarks: throughput and FP8-accuracy of the KV codec, with the limits beside them.

Measurement modules (``timing``, ``throughput``, ``accuracy``, ``realkv``) produce rows;
``results`` writes them as JSON Lines (format in ``bench/RESULTS.md``); ``compare`` and
``targets`` read results files back; ``ab`` and ``gate_check`` measure and judge the gate.
``cli.main`` is the entry point (``lmckv bench ...``; its commands are listed in
``bench.cli``).
"""
