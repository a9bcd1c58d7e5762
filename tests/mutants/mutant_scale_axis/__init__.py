"""Mutant: PER_PAGE_HEAD quantization pairs scale (p, h) with group (h, p) - the scales are
computed and stored right, V is quantized with the transposed table (Q-ROUND)."""
