"""migrate's writes never lose data: only regular files are replaced, by an atomic rename in the
destination's directory; a symlink is followed and kept; line endings and a byte order mark are
kept; a destination that cannot be written is one line (7); Ctrl-C at any point leaves the
original intact, no temporary file behind and no traceback (130)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.config import migrate as migrate_mod
from lmcache_compat.config.migrate import migrate_file
from lmcache_compat.errors import MigrationError, OutputError
from lmcache_compat.report.cli import main

OLD = "# for 0.3.9\nchunk_size: 256   # tokens\nplugin_locations: ['/p']   # plugins\n"
NEW = "# for 0.3.9\nchunk_size: 256   # tokens\nruntime_plugin_locations: ['/p'] # plugins\n"
ARGS = ("--from", "0.3.9", "--to", "0.5.6")


def _file(tmp_path: Path, text: str = OLD, name: str = "lmcache.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _migrate(*args: str) -> int:
    return main(["config", "migrate", *args, *ARGS])


def test_crlf_and_a_bom_are_kept(tmp_path: Path) -> None:
    """Every line keeps ``\\r\\n`` (not only the comment lines) and the BOM stays first."""
    crlf = OLD.replace("\n", "\r\n")
    result = migrate_file(_file(tmp_path, crlf), "0.5.6", source="0.3.9")
    assert result.text == NEW.replace("\n", "\r\n")
    bom = "\ufeff" + OLD
    path = _file(tmp_path, bom, "bom.yaml")
    migrate_file(path, "0.5.6", source="0.3.9", in_place=True)
    assert path.read_bytes() == ("\ufeff" + NEW).encode("utf-8")
    mixed = "a_key: 1\r\nplugin_locations: [x]\nchunk_size: 2\r\n"
    out = migrate_file(_file(tmp_path, mixed, "mixed.yaml"), "0.5.6", source="0.3.9").text
    assert out == mixed.replace("plugin_locations", "runtime_plugin_locations")


def test_in_place_follows_a_symlink_and_keeps_it(tmp_path: Path) -> None:
    real = _file(tmp_path, name="real.yaml")
    link = tmp_path / "link.yaml"
    link.symlink_to("real.yaml")
    result = migrate_file(link, "0.5.6", source="0.3.9", in_place=True)
    assert link.is_symlink() and os.readlink(link) == "real.yaml"
    assert real.read_text() == NEW
    assert result.written == f"{link} -> {real}"
    out = tmp_path / "out-link.yaml"
    out.symlink_to("out-real.yaml")  # a link to a file not there yet: created where it points
    migrate_file(real, "0.3.9", source="0.5.6", out=out)
    assert out.is_symlink() and (tmp_path / "out-real.yaml").read_text().startswith(
        "# for 0.3.9\nchunk_size: 256   # tokens\nplugin_locations: ['/p']"
    )


def test_o_through_a_link_to_the_input_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path)
    link = tmp_path / "alias.yaml"
    link.symlink_to(path.name)
    with pytest.raises(MigrationError, match="pass --in-place"):
        migrate_file(path, "0.5.6", source="0.3.9", out=link)
    assert path.read_text() == OLD


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "loop"])
def test_only_a_regular_file_is_replaced(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path)
    target = tmp_path / "target"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "device":
        target = Path(os.devnull)  # as root this would replace the machine's /dev/null
    else:
        target.symlink_to("target")
    before = os.lstat(target)
    assert _migrate(str(path), "-o", str(target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing written" in err, err
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    left = ["lmcache.yaml"] if kind == "device" else ["lmcache.yaml", "target"]
    assert sorted(p.name for p in tmp_path.iterdir()) == left  # no temporary file either


def test_a_destination_that_cannot_be_written_is_status_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    assert _migrate(str(path), "-o", str(tmp_path / "missing" / "out.yaml")) == 7
    assert "No such file or directory" in capsys.readouterr().err

    def read_only(*args: Any, **kwargs: Any) -> Any:  # what a read-only directory does
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert _migrate(str(path), "--in-place") == 7
    err = capsys.readouterr().err
    assert "Permission denied" in err and err.count("\n") == 1
    assert path.read_text() == OLD


def test_a_read_only_directory_for_real(tmp_path: Path) -> None:
    """Not as root (root writes anyway): a real read-only directory, in a subprocess."""
    if os.geteuid() == 0:
        pytest.skip("root may write into a read-only directory")
    folder = tmp_path / "ro"
    folder.mkdir()
    path = _file(folder)
    folder.chmod(0o555)
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "lmcache_compat",
                "config",
                "migrate",
                str(path),
                "--in-place",
                *ARGS,
            ],
            capture_output=True,
            text=True,
        )
    finally:
        folder.chmod(0o755)
    assert r.returncode == 7 and "Traceback" not in r.stderr
    assert path.read_text() == OLD


def _interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


#: Every step of a migration a Ctrl-C can land in: reading, planning, rewriting, proving,
#: creating the temporary file, writing it, flushing it to disk, keeping the mode, the rename.
STEPS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "read": lambda m: m.setattr(migrate_mod, "read_config_file", _interrupt),
    "plan": lambda m: m.setattr(migrate_mod, "plan_migration", _interrupt),
    "rewrite": lambda m: m.setattr(migrate_mod, "_apply", _interrupt),
    "prove": lambda m: m.setattr(migrate_mod, "_prove", _interrupt),
    "temporary": lambda m: m.setattr(tempfile, "mkstemp", _interrupt),
    "fsync": lambda m: m.setattr(os, "fsync", _interrupt),
    "chmod": lambda m: m.setattr(os, "chmod", _interrupt),
    "rename": lambda m: m.setattr(os, "replace", _interrupt),
}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("how", ["in-place", "output"])
def test_ctrl_c_at_any_point_leaves_the_original_intact(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    step: str,
    how: str,
) -> None:
    path = _file(tmp_path)
    out = _file(tmp_path, "previous output\n", "out.yaml")
    STEPS[step](monkeypatch)
    where = ["--in-place"] if how == "in-place" else ["-o", str(out)]
    assert _migrate(str(path), *where) == 130
    err = capsys.readouterr().err
    assert err == "lmcache-compat config migrate: interrupted\n"
    assert path.read_text() == OLD and out.read_text() == "previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lmcache.yaml", "out.yaml"]


def test_ctrl_c_in_a_real_process_is_130_without_a_traceback(tmp_path: Path) -> None:
    """SIGINT delivered to a real process while it works: 130, one line, the file intact."""
    path = _file(tmp_path)
    code = (
        "import os, signal, sys\n"
        # Python's own Ctrl-C handler, as in a terminal: a process started in the background
        # by a non-interactive shell (CI) inherits SIGINT ignored, and Python keeps that
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from lmcache_compat.config import migrate\n"
        "real = migrate._prove\n"
        "def prove(*a, **k):\n"
        "    real(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "migrate._prove = prove\n"
        "from lmcache_compat.report.cli import main\n"
        f"sys.exit(main(['config', 'migrate', {str(path)!r}, '--in-place', *{list(ARGS)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert path.read_text() == OLD


def test_write_atomic_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="a directory"):
        migrate_mod.write_atomic(tmp_path, "x")
    with pytest.raises(OutputError, match="cannot write into"):
        migrate_mod.write_atomic(tmp_path / "no" / "such.yaml", "x")
    written = migrate_mod.write_atomic(tmp_path / "new.yaml", "a: 1\r\n")
    assert written.read_bytes() == b"a: 1\r\n"
