import sys

from lmcache_compat.report.cli import main

sys.exit(main())
