"""Every install line the README and docs give a reader works, from a clone and as published.

A code block after ``<!-- install-lines -->`` holds install lines meant for the reader (the marker
is in the Markdown source; the README's opening command is one too, its test command is proven
by ``.ci/run``). A line that installs from the clone (``python -m pip install '.[config]'``) says
what it will be once published in its comment (``# from a clone; published: pip install
'lmcache-compat[config]'``). An install line anywhere else, or written inline in prose, fails here.

Each distinct install runs in a fresh venv: lmcache-compat from the wheel this tier built (``pip
install --no-index --find-links DIST``: the clone's ``.`` and the published name alike), then the
whole line resolved with ``--dry-run`` against the index (third-party requirements and the
extras' dependencies: resolution only, nothing of them installed).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.paths import ROOT

pytestmark = pytest.mark.packaging

MARKER = "<!-- install-lines -->"
PAGES = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
#: docs/pypi.md is the long description on the index: its lines are the published forms only.
PUBLISHED_ONLY = {"docs/pypi.md"}
_INSTALL = re.compile(r"^(?:python -m )?pip install\b")
_SECTION = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.S)
_CLONE_NOTE = re.compile(r"#\s*from a clone; published: (.+?)\s*$")
NAME = "lmcache-compat"


@dataclass(frozen=True)
class Install:
    """What one pip install line asks for: lmcache-compat's extras (``None``: not at all) and
    the third-party requirements."""

    ours: frozenset[str] | None
    others: tuple[str, ...]
    from_clone: bool


@dataclass(frozen=True)
class Line:
    page: str
    number: int
    text: str

    def where(self) -> str:
        return f"{self.page}:{self.number}: {self.text.strip()}"


def _code_lines(page: str) -> Iterator[tuple[Line, bool]]:
    """Each line of an indented or fenced code block, and whether its block is marked."""
    text = _SECTION.sub(lambda m: "\n" * m.group(0).count("\n"), (ROOT / page).read_text())
    marked = armed = fenced = in_block = False
    previous = ""
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            marked, armed = (armed, False) if fenced else (False, armed)
            continue
        after = not previous.strip() or previous.strip() == MARKER
        indented = raw.startswith("    ") and (in_block or after)
        if fenced or indented:
            if not (fenced or in_block):
                marked, armed = armed, False
            in_block = not fenced
            yield Line(page, number, raw), marked
        else:
            in_block = False if stripped else in_block
            if stripped == MARKER:
                armed = True
            elif stripped:
                armed = armed and stripped.startswith("<!--")
        previous = raw


def _parse(command: str) -> list[Install]:
    """The pip installs of a shell line (``a && b``; a comment is not part of it)."""
    out = []
    for part in re.split(r"\s#", command, maxsplit=1)[0].split("&&"):
        words = shlex.split(part)
        if words[:4] == ["python", "-m", "pip", "install"]:
            words = words[4:]
        elif words[:2] == ["pip", "install"]:
            words = words[2:]
        else:
            continue
        ours: set[str] | None = None
        others: list[str] = []
        clone = False
        for word in words:
            if word.startswith("-"):
                assert word in ("-U", "--upgrade"), f"an option the test does not know: {word}"
                continue
            if word.startswith((".", "/")):
                assert re.fullmatch(r"\.(\[[\w,]+\])?", word), f"not the clone: {word}"
                spec, clone = Requirement(NAME + word[1:]), True
            else:
                spec = Requirement(word)
            if canonicalize_name(spec.name) == NAME:
                ours = (ours or set()) | set(spec.extras)
            else:
                others.append(str(spec))
        out.append(Install(None if ours is None else frozenset(ours), tuple(others), clone))
    return out


def _readme_opening() -> Line:
    """The README's first command (the main job; the second, the test command, is .ci/run)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.startswith("    "))
    return Line("README.md", number, lines[number - 1])


def reader_lines() -> list[tuple[Line, list[Install]]]:
    """Every install line for the reader, each with what it installs (its published form
    too, for a line from the clone); fails on an install line that is not marked."""
    opening = _readme_opening()
    found: list[tuple[Line, list[Install]]] = [(opening, _parse(opening.text))]
    unmarked = []
    for page in PAGES:
        for line, marked in _code_lines(page):
            opening_block = page == "README.md" and line.number <= opening.number + 1
            if opening_block or not _INSTALL.match(line.text.strip()):
                continue
            if not marked:
                unmarked.append(line.where())
                continue
            installs = _parse(line.text)
            found.append((line, installs))
            if any(i.from_clone for i in installs):
                note = _CLONE_NOTE.search(line.text)
                assert note, f"{line.where()}: say what it will be once published"
                published = _parse(note.group(1))
                assert [(i.ours, i.others) for i in published] == [
                    (i.ours, i.others) for i in installs
                ], f"{line.where()}: the published form installs something else"
                found.append((Line(page, line.number, note.group(1)), published))
            else:
                assert page in PUBLISHED_ONLY or all(i.ours is None for i in installs), (
                    f"{line.where()}: installs lmcache-compat from the index; give the clone's "
                    "line and its published form"
                )
    assert unmarked == [], f"install lines outside a {MARKER} block: {unmarked}"
    return found


def test_no_install_line_hides_in_prose() -> None:
    """Prose may name an extra, not give a command: the commands are the marked blocks."""
    inline = re.compile(r"`((?:python -m )?pip install [^`]*)`")
    found = []
    for page in PAGES:
        text = _SECTION.sub("", (ROOT / page).read_text())
        found += [f"{page}: {m}" for m in inline.findall(text)]
    assert found == []


def test_every_install_line_is_marked_and_says_its_published_form() -> None:
    lines = reader_lines()
    pages = {line.page for line, _ in lines}
    assert {"README.md", "docs/config.md", "docs/sglang.md", "docs/pypi.md"} <= pages
    assert all(installs for _, installs in lines)


def _extra_requirements(wheel: Path) -> dict[str, set[str]]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(archive.read(name).decode("utf-8"))
    out: dict[str, set[str]] = {}
    for text in meta.get_all("Requires-Dist") or []:
        req = Requirement(text)
        match = re.search(r"extra == \"([\w-]+)\"", str(req.marker or ""))
        out.setdefault(match.group(1) if match else "", set()).add(canonicalize_name(req.name))
    return out


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_every_install_line_works_in_a_fresh_venv(tmp_path: Path, dist: Path, wheel: Path) -> None:
    distinct: dict[tuple[frozenset[str] | None, tuple[str, ...]], list[str]] = {}
    for line, installs in reader_lines():
        for install in installs:
            distinct.setdefault((install.ours, install.others), []).append(line.where())
    extras = _extra_requirements(wheel)
    version = wheel.name.split("-")[1]
    for n, ((ours, others), where) in enumerate(sorted(distinct.items(), key=str)):
        venv = tmp_path / f"venv{n}"
        _run(["uv", "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)])
        python = str(venv / "bin" / "python")
        spec = None
        if ours is not None:
            spec = f"{NAME}[{','.join(sorted(ours))}]" if ours else NAME
        wanted = [*([f"{spec}=={version}"] if spec else []), *others]
        out = _run(
            ["uv", "pip", "install", "--python", python, "--dry-run", "--find-links", str(dist),
             *wanted]
        )  # fmt: skip
        resolved = {canonicalize_name(m) for m in re.findall(r"^ \+ ([\w.-]+)==", out, re.M)}
        # what the fresh venv already holds (uv's seed: pip, and before 3.12 setuptools, wheel
        # and its packaging) satisfies a requirement without a line of the dry run
        resolved |= {
            canonicalize_name(p.name.split("-")[0])
            for p in venv.glob("lib/python*/site-packages/*.dist-info")
        }
        needed: set[str] = set()
        if ours is not None:
            needed = set().union(*(extras.get(e, set()) for e in ("", *sorted(ours))))
        needed |= {canonicalize_name(Requirement(r).name) for r in others}
        assert needed <= resolved, (where, sorted(needed - resolved), out)
        if spec is not None:  # lmcache-compat itself, for real, from the built wheel only
            out = _run(
                [python, "-m", "pip", "install", "--no-index", "--find-links", str(dist),
                 "--no-deps", spec]
            )  # fmt: skip
            assert "does not provide the extra" not in out, (where, out)
            assert (venv / "bin" / "lmcache-compat").is_file()
