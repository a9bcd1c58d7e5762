"""Mutant: PER_TENSOR dequantization multiplies in the output dtype (float16/bfloat16)
instead of float32 (Q-DEQUANT)."""
