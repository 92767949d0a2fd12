"""Static scanning: a release's sources read with ``ast`` within budgets, never imported.

:mod:`~lmcache_compat.scan.targets` opens a wheel, an sdist, a directory or the installed
distribution; :mod:`~lmcache_compat.scan.sources` and :mod:`~lmcache_compat.scan.archives` read
their files; :mod:`~lmcache_compat.budgets` bounds every read;
:mod:`~lmcache_compat.scan.modules` parses modules (classes, functions, imports, re-exports);
:mod:`~lmcache_compat.scan.classreader` turns classes into signatures;
:mod:`~lmcache_compat.upstream.scanner` reports a release's surfaces and capabilities.
"""
