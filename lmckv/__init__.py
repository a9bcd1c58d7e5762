"""lmckv's command line: the ``lmckv`` console script and its subcommands (see lmckv.cli)."""
