"""The research models: ``bursty`` (:mod:`.bursty`), ``shocks``, ``drift`` and
``shocks_ar1`` (:mod:`.shocks`, on the epoch grid of :mod:`.epochs`), ``mass_edits``
(:mod:`.mass_edits`), ``dynamic_shocks`` (:mod:`.dynamic_shocks`) and ``dynamic_edits``
(:mod:`.dynamic_edits`). See ``research/README.md``."""
