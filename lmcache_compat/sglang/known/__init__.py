"""What lmcache-compat knows of sglang and of LMCache's SGLang side, read from their files
without importing either: sglang's own files (``reader``, the call sites ``calls`` and the types
they pass ``types``), how each sglang release binds LMCache (``bind``), the measured sglang grid
(``grid``) and the known issues of sglang pairs (``issues``). Internal: the supported names are
:mod:`lmcache_compat.sglang`'s."""
