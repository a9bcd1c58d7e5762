"""The recommendation the report leads with, computed from a run's rows: which scale scope
(``scope_choice``) and which L2 serde (``serde_choice``) to configure, and why. ``lmckv.reports``
only renders it (see ``lmckv.bench``)."""
