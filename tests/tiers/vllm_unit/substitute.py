"""pytest plugin: run vLLM's own unit tests of its LMCache connector against
``lmcache_compat.vllm.LMCacheCompatConnector``, the way a user migrating their tests would.

Load it with ``-p substitute`` (this folder on ``PYTHONPATH``). Options:

``--lmcache-connector=compat`` (default)
    While pytest imports a target test module (:data:`TARGET_TEST_FILES`), the module
    ``vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector`` is answered from
    ``sys.modules`` by a stand-in holding only :data:`SUBSTITUTED_NAMES`: ``LMCacheConnectorV1``
    is :func:`thin_subclass` of ``LMCacheCompatConnector`` and ``LMCacheKVEvents`` is
    ``CompatKVEvents``. That is exactly the edit a user would make to the test's import line
    (``from lmcache_compat.vllm import ...``), done without touching the file; vLLM's own
    connector module is never imported in this mode, and the stand-in is removed again right
    after the import, so nothing else in vLLM sees it. ``LMCacheCompatConnector`` is also
    registered with vLLM's connector factory, as its ``vllm.general_plugins`` entry point would.
``--lmcache-connector=vllm``
    No substitution: the baseline with vLLM's own ``LMCacheConnectorV1``.
``--lmcache-outcomes=PATH``
    Write a JSON report: the mode, the connector class used and its file, and per test id the
    outcome of each phase (setup/call/teardown) with the exception's last line.

The thin subclass only maps vLLM's two private fields that the white-box tests set by hand:

* ``_lmcache_engine``: assigning it (re-)attaches the connector over the new engine, once,
  through ``LMCacheCompatConnector.attach`` (everything is decided then, as at construction);
* ``_kv_cache_events``: vLLM's name for the scheduler side's pending events, which
  ``LMCacheCompatConnector`` uses too: nothing to map.

Nothing else is overridden. Tests that build the connector as ``MagicMock(spec=...)`` and
call its class's functions on the mock never run the subclass's properties (a mock's attributes
are its own), so they exercise ``LMCacheCompatConnector``'s class methods as they are.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "SUBSTITUTED_NAMES",
    "TARGET_TEST_FILES",
    "VLLM_CONNECTOR_MODULE",
    "substitutions",
    "thin_subclass",
]

#: The vLLM module whose names the target test modules import.
VLLM_CONNECTOR_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector"
#: Test files (by name) whose import of :data:`VLLM_CONNECTOR_MODULE` is substituted.
TARGET_TEST_FILES = frozenset({"test_lmcache_connector.py"})
#: Names the stand-in module offers (anything else the test imports fails loudly).
SUBSTITUTED_NAMES = ("LMCacheConnectorV1", "LMCacheKVEvents")

_MODES = ("compat", "vllm")
_UNSET: Any = object()


def thin_subclass(base: type) -> type:
    """``LMCacheConnectorV1``: ``base`` (``LMCacheCompatConnector``) under vLLM's class name,
    and nothing else but this: assigning vLLM's private ``_lmcache_engine`` (the white-box tests
    do it by hand) attaches the engine the way construction does (``base.attach``). The other
    private field, ``_kv_cache_events``, already has vLLM's name in ``base``."""

    def get_engine(self: Any) -> Any:
        return self.__dict__["_lmcache_engine"]

    def set_engine(self: Any, engine: Any) -> None:
        # attach() assigns _lmcache_engine itself: that nested assignment only stores.
        if self.__dict__.get("_lmcache_engine", _UNSET) is engine:
            return
        self.__dict__["_lmcache_engine"] = engine
        self.attach(engine)

    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": "LMCacheConnectorV1",
        "__doc__": f"Test-side: {base.__qualname__} under vLLM's class name.",
        "_lmcache_engine": property(get_engine, set_engine),
    }
    return type("LMCacheConnectorV1", (base,), namespace)


def substitutions() -> dict[str, Any]:
    """What the stand-in module holds (imports lmcache_compat.vllm, hence vLLM)."""
    from lmcache_compat.vllm import CompatKVEvents, LMCacheCompatConnector

    return {
        "LMCacheConnectorV1": thin_subclass(LMCacheCompatConnector),
        "LMCacheKVEvents": CompatKVEvents,
    }


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lmcache-compat", "run vLLM's LMCache connector tests on ours")
    group.addoption(
        "--lmcache-connector",
        choices=_MODES,
        default="compat",
        help="compat: substitute LMCacheCompatConnector (default); vllm: vLLM's own class",
    )
    group.addoption(
        "--lmcache-outcomes",
        default=None,
        help="write per-test outcomes (JSON) to this path",
    )


class _Substitution:
    def __init__(self, config: pytest.Config) -> None:
        self.mode: str = config.getoption("--lmcache-connector")
        self.names: dict[str, Any] = substitutions() if self.mode == "compat" else {}
        self.imported: dict[str, str] = {}
        if self.names:
            from lmcache_compat.vllm.plugin import register

            register()

    def connector_class(self) -> tuple[str, str]:
        if self.names:
            cls = self.names["LMCacheConnectorV1"]
            base = cls.__mro__[1]
        else:
            module = __import__(VLLM_CONNECTOR_MODULE, fromlist=["LMCacheConnectorV1"])
            base = module.LMCacheConnectorV1
        source = sys.modules[base.__module__].__file__ or "?"
        return f"{base.__module__}.{base.__qualname__}", source

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        if not (
            self.names
            and isinstance(collector, pytest.Module)
            and collector.path.name in TARGET_TEST_FILES
        ):
            return (yield)
        stand_in = types.ModuleType(VLLM_CONNECTOR_MODULE, "lmcache-compat stand-in")
        for name, value in self.names.items():
            setattr(stand_in, name, value)
        previous = sys.modules.get(VLLM_CONNECTOR_MODULE)
        sys.modules[VLLM_CONNECTOR_MODULE] = stand_in
        try:
            report = yield
        finally:
            if previous is None:
                sys.modules.pop(VLLM_CONNECTOR_MODULE, None)
            else:
                sys.modules[VLLM_CONNECTOR_MODULE] = previous
        if report.passed:
            module = collector.obj
            for name, value in self.names.items():
                if name in vars(module) and vars(module)[name] is not value:
                    raise pytest.UsageError(
                        f"{collector.path.name}: {name} was not substituted (imported before "
                        "the plugin could answer the import?)"
                    )
            self.imported[collector.path.name] = ", ".join(
                n for n in self.names if n in vars(module)
            )
        return report

    def pytest_report_header(self) -> list[str]:
        name, source = self.connector_class()
        return [f"lmcache-compat: mode={self.mode}, connector={name} ({source})"]


class _Outcomes:
    def __init__(self, path: Path, substitution: _Substitution) -> None:
        self.path = path
        self.substitution = substitution
        self.tests: dict[str, dict[str, dict[str, str]]] = {}
        self.collect_errors: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        phases = self.tests.setdefault(report.nodeid, {})
        entry: dict[str, str] = {"outcome": report.outcome}
        if report.failed or report.skipped:
            entry["message"] = _last_line(report)
        phases[report.when] = entry

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid] = _last_line(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        name, source = self.substitution.connector_class()
        payload = {
            "mode": self.substitution.mode,
            "connector": name,
            "connector_file": source,
            "substituted_in": self.substitution.imported,
            "exitstatus": int(exitstatus),
            "collect_errors": self.collect_errors,
            "tests": self.tests,
        }
        self.path.write_text(json.dumps(payload, indent=1, sort_keys=True))


def _last_line(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    lines = [line for line in str(longrepr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pytest_configure(config: pytest.Config) -> None:
    substitution = _Substitution(config)
    config.pluginmanager.register(substitution, "lmcache-compat-substitution")
    outcomes = config.getoption("--lmcache-outcomes")
    if outcomes:
        config.pluginmanager.register(
            _Outcomes(Path(outcomes), substitution), "lmcache-compat-outcomes"
        )
