"""commands_pre of the ``packaging-floor`` tox env: build both artifacts as a fresh clone would,
unpack the sdist, and install the wheel built from it.

    python tests/tiers/packaging/prepare.py CHECKOUT OUT

1. the working tree's files (``git ls-files --cached --others --exclude-standard``: what a fresh
   clone of this work would hold, uncommitted changes included; every file when CHECKOUT is not a
   git work tree, as in an unpacked sdist) are copied to ``OUT/src``;
2. ``python -m build --installer uv`` there (the sdist, then the wheel from the sdist) into
   ``OUT/dist``, its output in ``OUT/build.log``, then ``twine check --strict`` into
   ``OUT/twine.log`` (``test_artifacts.py`` reads both: no warning, passed);
3. the sdist is unpacked into ``OUT/sdist`` (the env's ``change_dir``: the unit suite runs there,
   from the sdist's own files);
4. the wheel is installed into this interpreter's venv (``--no-deps``: the env pins packaging).

Needs only the standard library and uv (``build`` and ``twine`` get a venv of their own,
``OUT/tools``: this env pins the oldest packaging, which twine cannot import); prints the time
of each step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

#: Directories a working tree may hold that a clone does not (when git cannot say).
NOT_IN_A_CLONE = {".git", ".tox", ".venv", "build", "dist", "__pycache__", ".mypy_cache"}


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), *args], check=True, capture_output=True, text=True
    ).stdout


def tracked_files(checkout: Path) -> list[str] | None:
    """The files a clone of this working tree holds, or ``None`` when it is not the top of a
    git work tree (an unpacked sdist, even one inside a work tree's ignored .tox)."""
    try:
        if Path(_git(checkout, "rev-parse", "--show-toplevel").strip()) != checkout.resolve():
            return None
        out = subprocess.run(
            [
                "git",
                "-C",
                str(checkout),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in out.split("\0") if name and (checkout / name).is_file()]


def copy_sources(checkout: Path, dest: Path) -> int:
    if dest.exists():
        shutil.rmtree(dest)
    names = tracked_files(checkout)
    if names is None:
        shutil.copytree(
            checkout, dest, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE, "*.egg-info")
        )
        return sum(1 for p in dest.rglob("*") if p.is_file())
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout / name, target)
    return len(names)


#: The tools that build and check the artifacts, in a venv of their own (this env pins the
#: oldest packaging, which twine cannot import).
TOOLS = ("build>=1.2", "twine>=6.1")


def tools(venv: Path) -> str:
    """The tools venv's interpreter (made once; uv installs from its cache)."""
    python = venv / "bin" / "python"
    if not python.is_file():
        subprocess.run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(["uv", "pip", "install", "--quiet", "--python", str(python), *TOOLS], check=True)
    return str(python)


def build(python: str, src: Path, dist: Path, log: Path) -> None:
    if dist.exists():
        shutil.rmtree(dist)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [python, "-m", "build", "--installer", "uv", "--outdir", str(dist), str(src)],
        env=env,
        capture_output=True,
        text=True,
    )
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        sys.exit(f"python -m build failed (exit {done.returncode}); see {log}")


def unpack_sdist(dist: Path, dest: Path) -> Path:
    (sdist,) = dist.glob("*.tar.gz")
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.iterdir():  # emptied, not removed: it is the env's change_dir
        shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            _, _, rest = member.name.partition("/")
            if not rest or not (member.isfile() or member.isdir()):
                continue
            member.name = rest
            if hasattr(tarfile, "data_filter"):  # 3.11.4 on: refuse links and absolute names
                archive.extract(member, dest, filter="data")
            else:  # pragma: no cover
                archive.extract(member, dest)
    return sdist


def main(checkout: str, out: str) -> int:
    root, work = Path(checkout).resolve(), Path(out).resolve()
    steps: list[str] = []
    start = time.monotonic()
    count = copy_sources(root, work / "src")
    steps.append(f"copied {count} files {time.monotonic() - start:.1f}s")
    start = time.monotonic()
    python = tools(work / "tools")
    build(python, work / "src", work / "dist", work / "build.log")
    steps.append(f"built both artifacts {time.monotonic() - start:.1f}s")
    artifacts = sorted(str(p) for p in (work / "dist").iterdir())
    done = subprocess.run(
        [python, "-m", "twine", "check", "--strict", *artifacts],
        capture_output=True,
        text=True,
    )
    (work / "twine.log").write_text(f"exit {done.returncode}\n{done.stdout}{done.stderr}")
    start = time.monotonic()
    sdist = unpack_sdist(work / "dist", work / "sdist")
    (wheel,) = (work / "dist").glob("*.whl")
    subprocess.run(
        [
            "uv",
            "pip",
            "install",
            "--python",
            sys.executable,
            "--quiet",
            "--no-deps",
            "--reinstall",
            str(wheel),
        ],
        check=True,
    )
    steps.append(f"unpacked {sdist.name}, installed {wheel.name} {time.monotonic() - start:.1f}s")
    print("packaging: " + "; ".join(steps))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
