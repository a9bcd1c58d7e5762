"""Mutant: a reader that never checks the scale shape's dimension count (KV-SCALE-SHAPE): trailing
dimensions are folded into the last one the scope prescribes, so a PER_PAGE_HEAD scale_shape
(2, 2, 1) passes as (2, 2)."""
