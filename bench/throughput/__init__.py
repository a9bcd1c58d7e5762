"""Throughput of the codec and serde operations beside the limits measured on the same bytes,
and the targets they are held to (see ``lmckv.bench``)."""
