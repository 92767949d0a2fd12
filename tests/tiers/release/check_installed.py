"""commands_pre of each release env: print and assert what is installed.

python tests/tiers/release/check_installed.py EXPECTED_VERSION
"""

from __future__ import annotations

import sys

from lmcache_compat import installed_lmcache_version
from lmcache_compat.versions import parse_version


def main(expected: str) -> int:
    installed = installed_lmcache_version()
    print(f"installed LMCache: {installed} (expected {expected})")
    if installed != parse_version(expected):
        print(f"wrong LMCache installed: {installed} != {expected}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
