"""A store LMCache writes (SPEC.md "A store"): what each adapter names an object
(``names``) and each serde writes into it (``framing``, ``sizes``); reading one with
independent clients (``spec``, ``sources``) and checking it (``fsck``; ``lmckv fsck``); writing
LMCKV stores as lmckv and upstream's serializers do (``writers``, ``readers``), and real stores
through LMCache's own storage manager (``lmcache_writer``) on real servers (``servers``)."""
