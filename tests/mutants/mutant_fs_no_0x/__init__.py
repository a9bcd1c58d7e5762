"""Mutant: FS filenames carry the kv_rank as 8 hex digits without the '0x' prefix (the S3
form's rank), and the reader expects that (KEY-FS-FORM)."""
