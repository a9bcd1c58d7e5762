"""Mutant: a reader that skips the sign rule of scale_payload_len (KV-LEN): a negative
scale_payload_len is accepted when the lengths add up. kv-len-scale-negative failed its CRC
in the old vectors."""
