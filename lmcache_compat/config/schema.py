"""The configuration schema of every LMCache release, as typed records.

Read from the shipped ``lmcache_compat/upstream/data/config_schema.json`` (written by
``scripts/build_config_schema.py`` from the real artifacts with
:mod:`lmcache_compat.upstream.config_scan`), or, for an installed release the shipped data does
not list (a release newer than this lmcache-compat), scanned from its files on first use: a
release published today is checked the same way, from its own code.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.version import Version

from lmcache_compat.errors import DataFileError, NotInMatrixError
from lmcache_compat.upstream.shipped import read_data_json
from lmcache_compat.versions import installed_version, parse_version

__all__ = [
    "DATA_FILE",
    "ControllerSchema",
    "ECFacts",
    "FlagSpec",
    "KeySpec",
    "LoaderFacts",
    "ReleaseSchema",
    "Schemas",
    "compact_flag",
    "compact_key",
    "load_schemas",
    "release_schema",
    "schema_for",
    "shipped_block",
]

DATA_FILE = "config_schema.json"


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One configuration key of one release."""

    name: str
    #: The declared type, as source text (``Optional[list[int]]``).
    type: str | None
    #: The default where it is a literal, else ``{"expr": source text}``.
    default: Any
    #: What a value from the file goes through (source text; ``None``: taken as it is).
    converter: str | None
    #: What a value from the environment goes through (``None``: the raw string).
    env_converter: str | None
    #: Its environment variable (``LMCACHE_<KEY>``).
    env: str | None


@dataclass(frozen=True, slots=True)
class ECFacts:
    """The encoder-cache overrides of the same file and environment (0.4.5 on)."""

    file_prefix: str
    env_prefix: str
    nested_key: str | None


@dataclass(frozen=True, slots=True)
class LoaderFacts:
    """What a release's loaders do, each fact read from its code (see ``config_scan``)."""

    #: When an old name is mapped to its alias: only when it is also in the deprecation table
    #: (``deprecated-only``), ``always``, or never (``none``: no resolver).
    alias_rule: Literal["deprecated-only", "always", "none"]
    unknown_file_key: Literal["logged", "silent"]
    file_values: Literal["converted", "raw"]
    #: A file value its converter rejects: the load fails (``raise``), or a warning and
    #: ``None`` (``none``; other exceptions than ValueError still fail); ``raw``: no converter.
    conversion_error: Literal["raise", "none", "raw"]
    empty_file: Literal["defaults", "fails"]
    env_prefix: str | None
    env_reads_aliases: bool
    env_unquotes: bool
    config_file_env: str | None
    #: Whether ``LMCACHE_<KEY>`` overrides the file, or is not read once a file is named.
    env_with_file: Literal["overrides", "ignored", "unknown"]
    ec: ECFacts | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoaderFacts:
        ec = data.get("ec")
        return cls(
            alias_rule=data["alias_rule"],
            unknown_file_key=data["unknown_file_key"],
            file_values=data["file_values"],
            conversion_error=data["conversion_error"],
            empty_file=data["empty_file"],
            env_prefix=data.get("env_prefix"),
            env_reads_aliases=bool(data.get("env_reads_aliases")),
            env_unquotes=bool(data.get("env_unquotes")),
            config_file_env=data.get("config_file_env"),
            env_with_file=data.get("env_with_file", "unknown"),
            ec=None if not ec else ECFacts(ec["file_prefix"], ec["env_prefix"], ec["nested_key"]),
        )


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One flag of an MP command line."""

    options: tuple[str, ...]
    dest: str
    action: str | None = None
    type: str | None = None
    default: Any = None
    choices: tuple[Any, ...] | None = None
    nargs: Any = None
    required: bool = False
    hidden: bool = False
    deprecated: bool = False
    #: ``--no-<flag>`` spellings (``argparse.BooleanOptionalAction``).
    negated: tuple[str, ...] = ()

    @property
    def takes_value(self) -> bool:
        action = self.action or "store"
        return action in ("store", "append", "extend") and self.nargs != 0

    @property
    def is_switch(self) -> bool:
        return not self.takes_value

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlagSpec:
        choices = data.get("choices")
        return cls(
            options=tuple(data["options"]),
            dest=data["dest"],
            action=data.get("action"),
            type=data.get("type"),
            default=data.get("default"),
            choices=tuple(choices) if isinstance(choices, list) else None,
            nargs=data.get("nargs"),
            required=bool(data.get("required")),
            hidden=bool(data.get("hidden")),
            deprecated=bool(data.get("deprecated")),
            negated=tuple(data.get("negated", ())),
        )


def _message(value: Any) -> str:
    """A deprecation message (0.3.10.post1 ... 0.3.11 write each as a one-element tuple)."""
    if isinstance(value, list) and len(value) == 1:
        return str(value[0])
    return str(value)


def compact_flag(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A flag record without its empty fields (what the shipped file stores): ``None`` values,
    and the yes/no fields when no. A ``False`` or ``[]`` default is kept."""
    flags = ("required", "hidden", "deprecated", "negated")
    return {k: v for k, v in spec.items() if v is not None and not (k in flags and not v)}


def shipped_block(scanned: Mapping[str, Any], artifact: str, sha256: str) -> dict[str, Any]:
    """A scan (:func:`lmcache_compat.upstream.config_scan.scan_config`) as the shipped file
    stores it: where it came from first, records compacted, and a command whose flags equal an
    earlier command's written as ``{"same_as": ...}``."""
    commands: dict[str, Any] = {}
    for key, flags in scanned["mp_commands"].items():
        same = next(k for k, v in scanned["mp_commands"].items() if v == flags)
        commands[key] = (
            {"same_as": same}
            if same != key
            else {flag: compact_flag(spec) for flag, spec in flags.items()}
        )
    out: dict[str, Any] = {"version": scanned["version"], "artifact": artifact, "sha256": sha256}
    out.update({k: v for k, v in scanned.items() if k not in ("version", "keys", "mp_commands")})
    out["keys"] = {name: compact_key(entry) for name, entry in scanned["keys"].items()}
    out["mp_commands"] = commands
    return out


def compact_key(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A key record without ``None`` fields, and without ``env_converter`` where it is the
    file's converter (the key-table style: one converter for both)."""
    out = {k: v for k, v in entry.items() if v is not None}
    if "env_converter" in out and out["env_converter"] == out.get("converter"):
        del out["env_converter"]
    return out


@dataclass(frozen=True, slots=True)
class ControllerSchema:
    """The cache controller's own configuration (its own file and prefix)."""

    module: str
    env_prefix: str | None
    keys: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class ReleaseSchema:
    """The configuration of one release (compared and hashed by identity: one per release)."""

    version: str
    style: Literal["table", "fields"]
    loader: LoaderFacts
    keys: Mapping[str, KeySpec]
    aliases: Mapping[str, str]
    deprecated: Mapping[str, str]
    #: Old name -> key, read by the hand-written loaders of the ``fields`` style (0.3.0-0.3.3).
    file_fallbacks: Mapping[str, str]
    env_fallbacks: Mapping[str, str]
    legacy_keys: tuple[str, ...]
    controller: ControllerSchema | None
    #: ``LMCACHE_*`` names some part of the release reads that are not keys, and prefixes.
    env_names: frozenset[str]
    env_prefixes: tuple[str, ...]
    #: MP command key -> first option string -> flag.
    mp_commands: Mapping[str, Mapping[str, FlagSpec]]
    config_module: str = ""
    #: The third-party packages importing the config module needs (the real-loader tiers run
    #: where they are installed).
    config_imports: tuple[str, ...] = ()
    artifact: str = ""
    sha256: str = ""
    notes: tuple[str, ...] = field(default=())
    #: ``"shipped"``, or ``"scanned"`` (read from an installed release the data does not list).
    source: str = "shipped"
    #: :attr:`version` parsed, once: the other config/ modules compare releases by it without
    #: calling back into this one.
    parsed_version: Version = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # the reader contract: a scanned schema's version is an installed release's
        object.__setattr__(self, "parsed_version", parse_version(self.version))

    def env_name(self, key: str) -> str:
        return f"{self.loader.env_prefix or ''}{key.upper()}"

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "shipped") -> ReleaseSchema:
        keys = {
            name: KeySpec(
                name=name,
                type=entry.get("type"),
                default=entry.get("default"),
                converter=entry.get("converter"),
                env_converter=entry.get("env_converter", entry.get("converter")),
                env=entry.get("env"),
            )
            for name, entry in data["keys"].items()
        }
        raw_commands = data.get("mp_commands", {})
        commands: dict[str, dict[str, FlagSpec]] = {}
        for key, written in raw_commands.items():
            flags = raw_commands[written["same_as"]] if "same_as" in written else written
            commands[key] = {flag: FlagSpec.from_json(spec) for flag, spec in flags.items()}
        controller = data.get("controller")
        environment = data.get("environment", {})
        return cls(
            version=data["version"],
            style=data["style"],
            loader=LoaderFacts.from_json(data["loader"]),
            keys=keys,
            aliases=dict(data.get("aliases") or {}),
            deprecated={k: _message(v) for k, v in (data.get("deprecated") or {}).items()},
            file_fallbacks=dict(data.get("file_fallbacks") or {}),
            env_fallbacks=dict(data.get("env_fallbacks") or {}),
            legacy_keys=tuple(data.get("legacy_keys") or ()),
            controller=None
            if not controller
            else ControllerSchema(
                controller["module"], controller.get("env_prefix"), tuple(controller["keys"])
            ),
            env_names=frozenset(environment.get("names", ())),
            env_prefixes=tuple(environment.get("prefixes", ())),
            mp_commands=commands,
            config_module=data.get("config_module", ""),
            config_imports=tuple(data.get("config_imports", ())),
            artifact=data.get("artifact", ""),
            sha256=data.get("sha256", ""),
            notes=tuple(data.get("notes", ())),
            source=source,
        )


class Schemas:
    """Every shipped release's schema, oldest first."""

    def __init__(self, rows: list[ReleaseSchema]) -> None:
        self.rows = sorted(rows, key=lambda r: r.parsed_version)
        self._by_version = {r.parsed_version: r for r in self.rows}

    @property
    def versions(self) -> list[str]:
        return [r.version for r in self.rows]

    @property
    def newest(self) -> ReleaseSchema:
        return self.rows[-1]

    def get(self, version: str) -> ReleaseSchema | None:
        return self._by_version.get(parse_version(version))

    def row(self, version: str) -> ReleaseSchema:
        found = self.get(version)
        if found is None:
            raise NotInMatrixError(
                f"LMCache {version} is not in the shipped configuration data "
                f"({self.versions[0]} ... {self.versions[-1]})"
            )
        return found

    def between(self, a: ReleaseSchema, b: ReleaseSchema) -> list[ReleaseSchema]:
        """The releases from ``a`` to ``b`` (both included, either order), in that order; a
        scanned release the data does not list sits after the newest shipped one."""
        lo, hi = sorted((a.parsed_version, b.parsed_version))
        rows = [r for r in self.rows if lo <= r.parsed_version <= hi]
        for extra in (a, b):
            if extra.parsed_version not in self._by_version:
                rows.append(extra)
        rows.sort(key=lambda r: r.parsed_version)
        return rows if a.parsed_version <= b.parsed_version else rows[::-1]


@functools.lru_cache(maxsize=1)
def load_schemas() -> Schemas:
    """The shipped schemas (read once per process)."""
    data = read_data_json(DATA_FILE, "configuration data")
    try:
        return Schemas([ReleaseSchema.from_json(r) for r in data["releases"]])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataFileError(f"shipped configuration data is malformed: {exc!r}") from None


@functools.lru_cache(maxsize=4)
def _scanned_installed(version: str) -> ReleaseSchema:
    from lmcache_compat.upstream.config_scan import scan_config  # lazy: start-up time

    return ReleaseSchema.from_json(scan_config(None), source="scanned")


def schema_for(version: str | None = None) -> ReleaseSchema:
    """The schema of ``version`` (any PEP 440 spelling) from the shipped data; ``None``: the
    installed LMCache's (shipped when listed, else read from its files). A version neither
    shipped nor installed: :class:`~lmcache_compat.errors.NotInMatrixError`."""
    schemas = load_schemas()
    installed = installed_version("lmcache")
    if version is None:
        if installed is None:
            raise NotInMatrixError(
                "LMCache is not installed: name the release to check against (--lmcache X, "
                f"one of {schemas.versions[0]} ... {schemas.versions[-1]})"
            )
        version = installed
    found = schemas.get(version)
    if found is not None:
        return found
    if installed is not None and parse_version(installed) == parse_version(version):
        return _scanned_installed(installed)
    return schemas.row(version)


def release_schema(version: str | ReleaseSchema | None) -> ReleaseSchema:
    """A schema for a version (``None``: the installed release)."""
    return version if isinstance(version, ReleaseSchema) else schema_for(version)
