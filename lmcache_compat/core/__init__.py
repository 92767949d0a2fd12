"""The core: what a capability is, how a class is probed for it, and how an adapter binds it.

- :mod:`~lmcache_compat.core.roles`: the LMCache classes adapters wrap, and the methods every
  release of each has;
- :mod:`~lmcache_compat.core.catalog`: the capability table (declared);
- :mod:`~lmcache_compat.core.annotations` and :mod:`~lmcache_compat.core.signatures`: the one
  model of a member's signature and annotations, live or static;
- :mod:`~lmcache_compat.core.surface`: the one rule from a surface to capabilities (probed);
- :mod:`~lmcache_compat.core.probes`: the live, side-effect-free probe;
- :mod:`~lmcache_compat.core.arguments`: the argument policy and the one function that applies
  a row;
- :mod:`~lmcache_compat.core.binding` and :mod:`~lmcache_compat.core.adapter`: adapters bound
  once (adapted); :mod:`~lmcache_compat.core.fallbacks`: what they do without a capability.

Nothing here imports LMCache, vLLM or torch.
"""
