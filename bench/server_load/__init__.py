"""Protocol servers measured under load: many honest clients, and hostile ones beside a
canary (see ``lmckv.bench``)."""
