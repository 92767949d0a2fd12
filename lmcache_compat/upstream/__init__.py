"""What lmcache-compat knows about upstream: where its code lives and what was measured.

- :mod:`~lmcache_compat.upstream.locations`: every upstream symbol's known modules (the only
  place a module path is written); :mod:`~lmcache_compat.upstream.resolve` finds them;
- :mod:`~lmcache_compat.upstream.scanner`: what a release offers, read from its files
  (``lmcache-compat scan``);
- :mod:`~lmcache_compat.upstream.matrix`: the shipped release matrix (``data/releases/``: a file
  per release and an index);
- :mod:`~lmcache_compat.upstream.grid`: the measured vLLM x LMCache grid
  (``data/vllm_grid.json``);
- :mod:`~lmcache_compat.upstream.known_issues`: known breakages of pairs, and the verdict.
"""
