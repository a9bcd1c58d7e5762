"""Mutant: a reader that accepts a k_payload_len that is not a whole number of K elements
(257 bytes of float16 K, KV-LEN) when the three lengths add up to the payload: the length-sum
and CRC checks still run. The vector kv-len-k-odd ran past the end of its buffer until the
vectors were edited to break one rule each, so the old suite could not catch this."""
