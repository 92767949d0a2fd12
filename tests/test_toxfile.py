"""toxfile.py (tox's inline plugin): the scan-python tiers find their interpreter on PATH, under
pyenv or among uv's managed ones, and a missing one is one "not run" line (a failure with CI).

The interpreters here are small scripts that answer the plugin's probe as CPython would; tox's
own modules, absent from the unit tier, are stood in for by the two names the hooks use (the
real tox runs the plugin in every tox invocation, and ``.ci/run`` runs the tiers).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tools.paths import ROOT


def _toxfile() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toxfile", ROOT / "toxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


toxfile = _toxfile()


def _python(path: Path, answer: str, code: int = 0) -> Path:
    """An executable that prints ``answer`` (what the probe reads) and exits ``code``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{answer}'\nexit {code}\n")
    path.chmod(0o755)
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path / "home"), **extra}


def test_the_env_names_say_the_version() -> None:
    assert toxfile.wanted_version("scan-python310") == "3.10"
    assert toxfile.wanted_version("scan-python313") == "3.13"
    assert toxfile.wanted_version("unit") is None


def test_found_on_path(tmp_path: Path) -> None:
    found = _python(tmp_path / "bin" / "python3.12", "cpython 3.12")
    assert toxfile.find_python("3.12", _env(tmp_path)) == found


def test_a_shim_that_fails_and_a_wrong_python_are_passed_over_for_pyenv(tmp_path: Path) -> None:
    _python(tmp_path / "bin" / "python3.10", "pyenv: python3.10: command not found", code=127)
    _python(tmp_path / "bin2" / "python3.10", "cpython 3.11")  # claims the name, is not it
    versions = tmp_path / "pyenv" / "versions"
    _python(versions / "3.10.2" / "bin" / "python3.10", "cpython 3.10")
    newest = _python(versions / "3.10.13" / "bin" / "python3.10", "cpython 3.10")
    _python(versions / "3.10-dev" / "bin" / "python3.10", "cpython 3.10")
    env = _env(tmp_path, PYENV_ROOT=str(tmp_path / "pyenv"))
    env["PATH"] += f":{tmp_path / 'bin2'}"
    assert toxfile.find_python("3.10", env) == newest  # 13 > 2: numbers, not text


def test_pyenv_defaults_to_home(tmp_path: Path) -> None:
    found = _python(
        tmp_path / "home" / ".pyenv" / "versions" / "3.13.1" / "bin" / "python3.13", "cpython 3.13"
    )
    assert toxfile.find_python("3.13", _env(tmp_path)) == found


def test_uv_managed_interpreters_are_asked_for_without_a_download(tmp_path: Path) -> None:
    managed = _python(tmp_path / "uvpython" / "python3.13", "cpython 3.13")
    log = tmp_path / "uv-args"
    uv = tmp_path / "bin" / "uv"
    uv.parent.mkdir(parents=True)
    uv.write_text(f'#!/bin/sh\necho "$@" > {log}\necho {managed}\n')
    uv.chmod(0o755)
    assert toxfile.find_python("3.13", _env(tmp_path)) == managed
    args = log.read_text().split()
    assert {"--managed-python", "--no-python-downloads"} <= set(args) and args[-1] == "3.13"


def test_missing_is_one_line_with_what_works_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path)
    assert toxfile.find_python("3.10", env) is None
    monkeypatch.setattr(toxfile, "_apt_candidate", lambda package: package == "python3.10")
    line = toxfile.not_run_line("scan-python310", "3.10", env)
    assert line.startswith("scan-python310: not run: CPython 3.10 not found")
    assert line.endswith("get it: apt-get install python3.10 python3.10-venv")
    assert "\n" not in line
    monkeypatch.setattr(toxfile, "_apt_candidate", lambda package: False)
    assert toxfile.how_to_get("3.10", env) == "install CPython 3.10 and put python3.10 on PATH"
    _python(tmp_path / "bin" / "uv", "")
    assert toxfile.how_to_get("3.10", env) == "uv python install 3.10"
    _python(tmp_path / "bin" / "pyenv", "")
    assert toxfile.how_to_get("3.10", env).startswith("pyenv install 3.10")


class _Skip(Exception):
    pass


class _Fail(Exception):
    pass


class _MemoryLoader:
    def __init__(self, **raw: Any) -> None:
        self.raw = raw


@pytest.fixture
def fake_tox(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two tox names the hooks import (tox itself is not in the unit tier)."""
    modules = {
        "tox": types.ModuleType("tox"),
        "tox.config": types.ModuleType("tox.config"),
        "tox.config.loader": types.ModuleType("tox.config.loader"),
        "tox.config.loader.memory": types.ModuleType("tox.config.loader.memory"),
        "tox.tox_env": types.ModuleType("tox.tox_env"),
        "tox.tox_env.errors": types.ModuleType("tox.tox_env.errors"),
    }
    modules["tox.config.loader.memory"].MemoryLoader = _MemoryLoader  # type: ignore[attr-defined]
    modules["tox.tox_env.errors"].Skip = _Skip  # type: ignore[attr-defined]
    modules["tox.tox_env.errors"].Fail = _Fail  # type: ignore[attr-defined]
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def _conf(name: str) -> Any:
    return types.SimpleNamespace(name=name, loaders=[])


def _tox_env(name: str, work_dir: Path) -> Any:
    return types.SimpleNamespace(conf=types.SimpleNamespace(name=name), core={"work_dir": work_dir})


@pytest.mark.usefixtures("fake_tox")
def test_a_found_interpreter_becomes_the_base_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _python(tmp_path / "bin" / "python3.12", "cpython 3.12")
    monkeypatch.setattr(toxfile, "_found", lambda version: found)
    conf = _conf("scan-python312")
    toxfile.tox_add_env_config(conf, None)
    assert conf.loaders[0].raw == {"base_python": [str(found)]}
    (tmp_path / "not-run-scan-python312.txt").write_text("stale\n")
    toxfile.tox_before_run_commands(_tox_env("scan-python312", tmp_path))
    assert not (tmp_path / "not-run-scan-python312.txt").exists()
    other = _conf("unit")
    toxfile.tox_add_env_config(other, None)
    assert other.loaders == []


@pytest.mark.usefixtures("fake_tox")
def test_a_missing_interpreter_is_not_run_or_with_ci_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(toxfile, "_found", lambda version: None)
    monkeypatch.setattr(toxfile, "how_to_get", lambda version, environ=None: "pyenv install 3.10")
    conf = _conf("scan-python310")
    toxfile.tox_add_env_config(conf, None)
    raw = conf.loaders[0].raw
    assert raw["base_python"] == [sys.executable] and raw["package"] == "skip"
    assert raw["commands"] == [] and raw["dependency_groups"] == []
    (tmp_path / "junit-scan-python310.xml").write_text("<testsuite/>")  # an old run's
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(_Skip, match=r"^scan-python310: not run: CPython 3.10 not found .*pyenv"):
        toxfile.tox_before_run_commands(_tox_env("scan-python310", tmp_path))
    assert not (tmp_path / "junit-scan-python310.xml").exists()
    marker = (tmp_path / "not-run-scan-python310.txt").read_text()
    assert marker.startswith("scan-python310: not run:") and marker.count("\n") == 1
    monkeypatch.setenv("CI", "true")
    with pytest.raises(_Fail, match="CI is set"):
        toxfile.tox_before_run_commands(_tox_env("scan-python310", tmp_path))


def test_tox_ini_writes_no_interpreter_path_or_patch_version() -> None:
    text = (ROOT / "tox.ini").read_text()
    section = text[text.index("[testenv:scan-python") :].split("\n[", 1)[0]
    assert "pyenv" not in section.split("commands =")[0].split("base_python =")[1]
    assert not __import__("re").search(r"3\.1\d\.\d", section)
