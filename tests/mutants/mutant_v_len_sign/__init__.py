"""Mutant: a reader that skips the sign rule of v_payload_len (KV-LEN): a negative v_payload_len is
accepted when the lengths add up. kv-len-v-negative failed its CRC in the old vectors."""
