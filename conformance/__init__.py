"""lmckv's cross-implementation conformance suite (see conformance/README.md)."""
