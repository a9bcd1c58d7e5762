"""What every benchmark room stands on: rows and their files, the machine record, the
implementations measured, the scope vocabulary, progress bars (see ``lmckv.bench``)."""
