"""``import lmcache_compat`` must not import torch, vLLM or LMCache (nor pay for metadata)."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("torch", "vllm", "lmcache", "sglang", "numpy", "importlib.metadata")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_pulls_in_none_of_the_wrapped_libraries() -> None:
    mods = _modules_after("import lmcache_compat")
    assert "lmcache_compat" in mods
    for name in FORBIDDEN:
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


def test_probe_and_adapter_need_none_of_them_either() -> None:
    code = (
        "import lmcache_compat\n"
        "from tests.support.fakes import Fake_0_5_6\n"
        "a = lmcache_compat.ConnectorAdapter(Fake_0_5_6())\n"
        "a.get_block_ids_with_load_errors(); a.get_kv_events()\n"
    )
    mods = _modules_after(code)
    for name in ("torch", "vllm", "lmcache"):
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


def test_the_public_api_is_one_list() -> None:
    """``__all__``, the lazy table and the type checkers' imports name the same objects, and
    each resolves to its defining module's object."""
    import ast
    import importlib
    from pathlib import Path

    import lmcache_compat

    source = Path(lmcache_compat.__file__).read_text(encoding="utf-8")
    typed: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    typed.update(alias.asname or alias.name for alias in stmt.names)
    lazy = set(lmcache_compat._LAZY)
    assert set(lmcache_compat.__all__) == lazy | {"__version__"}
    assert typed == lazy
    for name, module in lmcache_compat._LAZY.items():
        assert getattr(lmcache_compat, name) is getattr(importlib.import_module(module), name)


def test_every_error_a_public_call_raises_is_exported() -> None:
    """An error the adapters, probes or the connector can raise is importable from
    ``lmcache_compat`` (found by reading their sources for the error classes they name)."""
    import ast
    from pathlib import Path

    import lmcache_compat
    from lmcache_compat import errors

    error_names = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.LMCacheCompatError)
    }
    root = Path(lmcache_compat.__file__).parent
    named: set[str] = set()
    for sub in ("core", "mp", "engine", "vllm"):
        for path in (root / sub).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Name) and node.id in error_names:
                    named.add(node.id)
    # the scan errors are raised by the scanner and the command line, not by a public call
    scan_only = {n for n in named if issubclass(getattr(errors, n), errors.ScanError)} - {
        "AmbiguousLocationError"
    }
    assert named - scan_only <= set(lmcache_compat.__all__), sorted(
        named - scan_only - set(lmcache_compat.__all__)
    )


def test_the_test_kit_needs_none_of_them_and_is_lazy() -> None:
    mods = _modules_after("import lmcache_compat.testing")
    assert "lmcache_compat.testing.fakes" not in mods  # PEP 562: nothing until a name is used
    mods = _modules_after(
        "from lmcache_compat.testing import fake, fail_loads\n"
        "fail_loads(fake('0.5.6', 'LMCacheConnectorV1Impl'), {1})\n"
    )
    for name in ("torch", "vllm", "lmcache", "pytest"):
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


def test_the_sglang_package_and_its_plugin_import_none_of_them() -> None:
    mods = _modules_after(
        "import lmcache_compat.sglang, lmcache_compat.sglang.plugin\n"
        "from lmcache_compat.sglang import BACKEND_NAME, plan, VARIANTS\n"
    )
    for name in ("torch", "vllm", "lmcache", "sglang"):
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


#: What doctor's answer never needs without --mp-server (http.client imports email), nor for
#: an installed LMCache's directory (the archive readers and what they import).
DOCTOR_NEVER = ("http.client", "email", "lmcache_compat.mp.server", "tarfile", "zipfile", "shutil")


def test_doctor_imports_only_what_its_answer_needs() -> None:
    code = (
        "import contextlib, io\n"
        "from lmcache_compat.report.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['doctor'])\n"
        "    main(['doctor', '--json'])\n"
    )
    mods = _modules_after(code)
    assert "lmcache_compat.report.doctor" in mods
    for name in DOCTOR_NEVER:
        assert name not in mods, name
    with_server = _modules_after(
        "import contextlib, io\n"
        "from lmcache_compat.report.cli import main\n"
        "with contextlib.redirect_stderr(io.StringIO()):\n"
        "    main(['doctor', '--mp-server', 'banana'])\n"
    )
    assert "lmcache_compat.mp.server" in with_server  # the option asks for it
