"""A store LMCache writes (SPEC.md "A store"): the one catalogue of its adapters and serdes
(``catalogue``); what each adapter names an object (``names``) and each serde writes into it
(``framing``, ``sizes``); where a store is (``locations``, ``spec``) and its one client per kind
of store (``sources``), read by fsck and written by the tests alike; checking it (``fsck``;
``lmckv fsck``); writing LMCKV stores as lmckv and upstream's serializers do (``writers``,
``readers``), and real stores through LMCache's own storage manager (``lmcache_writer``) on
real servers (``servers``)."""
