"""The regression gate: two runs compared, one decision per run, and whether the gate holds
on this machine (see ``lmckv.bench``)."""
