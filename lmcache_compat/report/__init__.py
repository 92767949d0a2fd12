"""What users read: ``doctor`` (:mod:`~lmcache_compat.report.doctor`, its text in
:mod:`~lmcache_compat.report.doctor.text`), the typed release ``diff`` (computed by
:mod:`~lmcache_compat.upstream.diff`), the tables (:mod:`~lmcache_compat.report.tables`) and
the command line (:mod:`~lmcache_compat.report.cli`)."""
