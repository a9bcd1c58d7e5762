"""lmckv benchmarks, in rooms named after what they measure; ``lmckv bench ...`` is
``bench_command`` (its subcommands are listed there). Results are JSON Lines files
(format in ``bench/RESULTS.md``; committed examples in ``bench/results/``).

- ``common``: what every room stands on: the rows and their files (``rows``), the machine
  record (``machine``, ``env``, ``nvml``), the implementations measured (``impls``), the scope
  vocabulary (``scopes``) and progress bars.
- ``throughput``: codec and serde operations beside the memcpy/CRC/alloc limits measured on the
  same bytes (``measure``, ``runner``, ``workers``, ``timing``), and the targets they meet.
- ``accuracy``: FP8 reconstruction and attention error per scope on synthetic and real KV
  (``reconstruction``, ``data``, ``realkv``) and the end-to-end run of a real model over a
  quantized cache (``e2e``, ``e2e_run``); the serdes compared there (``serdes``).
- ``gate``: the regression gate: comparisons of two runs (``compare``, ``ab``), the run-level
  decision (``decision``, ``verdict``) and whether the gate holds on a machine (``gate_check``).
- ``server_load``: protocol servers under many clients (``load``) and hostile ones (``hostile``).
- ``gpu``: the CUDA check of the fused kernels (``check``).
- ``recommendation``: the scope and serde an operator should configure, decided from a run's
  rows (``scope_choice``, ``serde_choice``); the report only renders it.
"""
