"""The CUDA check of the fused FP8 kernels on a GPU machine (see ``lmckv.bench``)."""
