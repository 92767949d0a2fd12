import sys

from lmcache_compat.cli import main

sys.exit(main())
