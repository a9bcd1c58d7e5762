"""Mutant: a reader that accepts a negative k_payload_len when the three lengths add up to the
payload (KV-LEN): the length-sum and CRC checks still run. The vector kv-len-k-negative
failed its CRC until the vectors were edited to break one rule each, so the old suite could
not catch this."""
