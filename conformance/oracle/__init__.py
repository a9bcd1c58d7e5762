"""A second implementation of the FP8 quantization rule (SPEC.md Q-SCALE, Q-ROUND,
Q-DEQUANT, Q-NONFINITE, Q-EXTERNAL), written without torch and without ``reference_impl``.

The golden set's expected V bytes, scales and dequantized values are produced by the
reference; ``tests/test_quant_oracle.py`` recomputes every one of them here. Float formats
are rounded from float32 bit patterns with integer arithmetic (``float_bits``), float32
arithmetic is NumPy's IEEE float32 arithmetic, and the scopes and axis orders are laid out
with NumPy (``fp8_quant``).
"""
