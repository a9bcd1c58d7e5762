"""Mutant: the blob CRC is CRC-32C (Castagnoli), as upstream's comment claims, instead of
the CRC-32 (IEEE) upstream actually writes. Must fail KV-CRC / KV-LAYOUT tests."""
