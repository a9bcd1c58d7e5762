"""The operator's commands: ``lmckv inspect`` (blobs), ``lmckv fsck`` (a store) and
``lmckv serve`` (the reference cache server), each a ``NAME_command`` module (``lmckv.cli``)."""
