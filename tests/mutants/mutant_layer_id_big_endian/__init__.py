"""Mutant: layer_id (offset 20) is written and read big-endian. Round trips through itself,
so only golden bytes catch it (KV-LAYOUT)."""
