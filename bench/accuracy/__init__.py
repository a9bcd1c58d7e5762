"""FP8 accuracy: V reconstruction and attention error per scale scope on synthetic and real
KV, and the end-to-end run of a real model over a quantized cache (see ``lmckv.bench``)."""
