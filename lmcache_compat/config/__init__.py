"""LMCache configuration across releases.

* :mod:`~lmcache_compat.config.schema`: every release's keys, tables and loader facts
  (shipped data, or a scan of an installed release the data does not list).
"""
