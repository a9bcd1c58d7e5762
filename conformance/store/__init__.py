"""A store on disk: the directory of blob files an FS L2 adapter writes, how to write one
(writers.py) and how to check one (fsck.py; ``lmckv fsck``)."""
