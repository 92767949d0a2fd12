"""Adding an optional connector method takes a catalog row and a fallback, nothing else.

A copy of the package gets one new capability -- an enum member and a row in
``core/catalog.py``, a fallback in ``core/fallbacks.py``, and no other change -- and in a fresh
interpreter over that copy: the probe sees it, ``ConnectorAdapter`` binds the engine's own method
or the fallback, the strict mode raises, a test double is bound through ``PartialEngine``, and
the vLLM connector's decisions forward it under vLLM's name (where vLLM's base class defines it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lmcache_compat"

MEMBER_ANCHOR = '    REGISTER_KV_CACHES = "register_kv_caches"\n'
MEMBER = '    KV_CONNECTOR_STATS = "kv_connector_stats"\n'
ROW_ANCHOR = "    # --- multi-process adapters"
ROW = """    CapabilitySpec(
        capability=Capability.KV_CONNECTOR_STATS,
        owner=CONNECTOR,
        method="get_kv_connector_stats",
        params=(),
        since="9.9.9",
        fallback=fb.no_stats,
        fallback_result="None (no statistics)",
        impact="the connector reports no transfer statistics",
    ),
"""
FALLBACK = '''

def no_stats(self: object) -> None:
    """Fallback of ``get_kv_connector_stats()``: nothing measured."""
'''

CHECK = textwrap.dedent(
    """
    import dataclasses
    from unittest import mock

    from lmcache_compat import Capability, ConnectorAdapter, MissingCapabilityError, probe
    from lmcache_compat.core import fallbacks
    from lmcache_compat.vllm.decisions import decide, engine_binding, forwarded
    from tests.support.fakes import Fake_0_5_6
    from tests.vllm.test_decisions import V033

    class Newer(Fake_0_5_6):
        def get_kv_connector_stats(self):
            return {"bytes": 1}

    cap = Capability("kv_connector_stats")
    assert cap in probe(Newer) and cap not in probe(Fake_0_5_6)
    newer = Newer()
    adapter = ConnectorAdapter(newer, require=[cap])
    assert adapter.get_kv_connector_stats() == {"bytes": 1}
    assert ConnectorAdapter(Fake_0_5_6()).get_kv_connector_stats.__func__ is fallbacks.no_stats
    strict = ConnectorAdapter(Fake_0_5_6(), strict=True)
    try:
        strict.get_kv_connector_stats()
    except MissingCapabilityError as exc:
        assert "kv_connector_stats" in str(exc) and "9.9.9" in str(exc)
    else:
        raise AssertionError("strict mode did not raise")
    facts = dataclasses.replace(
        V033, base_methods=V033.base_methods | {"get_kv_connector_stats"}
    )
    assert "get_kv_connector_stats" in forwarded(facts)
    assert "get_kv_connector_stats" not in forwarded(V033)
    binding = engine_binding(newer, require_engine=True)
    plan = decide(binding, newer, facts, native=False, events=None)
    assert plan.calls["get_kv_connector_stats"]() == {"bytes": 1}
    double = mock.MagicMock()
    partial = engine_binding(double, require_engine=False)
    assert partial.get_kv_connector_stats is double.get_kv_connector_stats
    print("new capability forwarded")
    """
)


def test_a_catalog_row_and_a_fallback_forward_a_new_method(tmp_path: Path) -> None:
    copy = tmp_path / "lmcache_compat"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    catalog = copy / "core" / "catalog.py"
    text = catalog.read_text(encoding="utf-8")
    assert MEMBER_ANCHOR in text and ROW_ANCHOR in text
    text = text.replace(MEMBER_ANCHOR, MEMBER_ANCHOR + MEMBER, 1)
    text = text.replace(ROW_ANCHOR, ROW + ROW_ANCHOR, 1)
    catalog.write_text(text, encoding="utf-8")
    fallbacks = copy / "core" / "fallbacks.py"
    fallbacks.write_text(fallbacks.read_text(encoding="utf-8") + FALLBACK, encoding="utf-8")
    changed = sorted(
        str(p.relative_to(copy))
        for p in copy.rglob("*.py")
        if p.read_bytes() != (PACKAGE / p.relative_to(copy)).read_bytes()
    )
    assert changed == ["core/catalog.py", "core/fallbacks.py"]
    env_path = f"{tmp_path}:{PACKAGE.parent}"
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "new capability forwarded" in done.stdout
