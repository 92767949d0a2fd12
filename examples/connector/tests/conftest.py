pytest_plugins = ["lmcache_compat.testing.pytest_plugin"]
