"""lmckv's golden vectors as package data: ``v1/*.json`` manifests and the files they name,
and ``v2/codec.json`` (the encoded-KV v2 draft's vectors) with ``v2/codec/``.

Read them with ``importlib.resources.files("lmckv.golden_blobs")`` (lmckv.base.resources);
``LMCKV_GOLDEN_DIR`` points the suite at another copy. The folder stays at the top of the
repository so that the committed bytes are easy to find; ``python -m lmckv.conformance.golden``
regenerates it in a checkout.
"""
