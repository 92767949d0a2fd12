"""The real loaders prove the shipped configuration schema and the loader model.

:func:`build_request` makes, from a release's shipped schema, the probes
``tests/support/config_probe_main.py`` runs against that release's real ``lmcache.v1.config``
(a subprocess: the ``releases`` tier for the releases whose config module imports with PyYAML
and requests, the ``grid-vllm0.32.0`` tier, which has torch, for the older ones);
:func:`mismatches` compares what the real loaders did with what lmcache-compat predicts:

* the key set (order too), the alias and deprecation tables, the literal defaults;
* every old name (alias, deprecated, code fallback) and an unknown key in one file: which names
  the loader logs as unknown, which as deprecated, which key each value lands in;
* tricky values, one file each (``"512"`` for an int, ``256.7``, ``"yes"`` for a bool, a list
  for an int...): the value read, or the exception the load raises;
* environment variables, alone and over a file: the value read, or that it is lost;
* the round trip: a config in the shape of 0.3.5's documented examples, migrated to this release,
  loads with no "Unknown configuration key" warning but for the keys the migration reported.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from lmcache_compat.config.check import check_config
from lmcache_compat.config.migrate import migrate_text, plan_migration
from lmcache_compat.config.resolver import CAUGHT, base_type, convert, resolve_name
from lmcache_compat.config.schema import ReleaseSchema, load_schemas
from lmcache_compat.config.yamlread import read_config_bytes

__all__ = [
    "ROUND_TRIP_SOURCE",
    "build_request",
    "mismatches",
    "run_probe",
]

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "tests" / "support" / "config_probe_main.py"
BOGUS = "bogus_probe_key"

#: A configuration in the shape of LMCache 0.3.5's documented examples (the 0.3.0 sdist's
#: examples/*.yaml and docs), using keys that later releases renamed.
ROUND_TRIP_SOURCE = """\
# LMCache configuration written for 0.3.5
chunk_size: 256        # tokens per chunk
local_cpu: true
max_local_cpu_size: 5.0
local_disk: "file:///tmp/lmcache-probe/"
max_local_disk_size: 2.0
remote_url: null
remote_serde: "naive"

# blending
enable_blending: false
blend_recompute_ratio: 0.15

# plugins and storage backends
plugin_locations: ["/tmp/lmcache-probe-plugins"]
external_backends: ["probe_backend"]
cufile_buffer_size: 512
"""


def _sample(schema: ReleaseSchema, key: str) -> Any:
    """A harmless value for ``key`` (a boolean keeps its default: flipping one can trip the
    release's validation)."""
    spec = schema.keys[key]
    base, _ = base_type(spec.type)
    if base == "bool":
        return spec.default if isinstance(spec.default, bool) else False
    return {
        "int": 4321,
        "float": 0.25,
        "str": "probe",
        "list[int]": [4321],
        "list[str]": ["probe"],
        "list[float]": [0.25],
        "dict": {"probe": 1},
    }.get(base, "probe")


#: (key, YAML text of its value) for the value probes; a key a release lacks is skipped.
VALUE_CASES: tuple[tuple[str, str], ...] = (
    ("chunk_size", '"512"'),
    ("chunk_size", "256.7"),
    ("chunk_size", "abc"),
    ("chunk_size", "true"),
    ("chunk_size", "[1, 2]"),
    ("save_decode_cache", '"yes"'),
    ("save_decode_cache", "yes"),
    ("save_decode_cache", "1"),
    ("max_local_cpu_size", '"2.5"'),
    ("max_local_cpu_size", "x"),
    ("remote_serde", "123"),
    ("extra_config", '"{\\"a\\": 1}"'),
    ("extra_config", '"{a"'),
    ("lookup_server_worker_ids", '"1,2"'),
    ("lookup_server_worker_ids", "5"),
    ("lookup_server_worker_ids", '"[1, 2]"'),
    ("storage_plugins", '"a,b"'),
)
#: (variable suffix, text) for the environment probes.
ENV_CASES: tuple[tuple[str, str], ...] = (
    ("CHUNK_SIZE", "512"),
    ("CHUNK_SIZE", "abc"),
    ("SAVE_DECODE_CACHE", "true"),
    ("SAVE_DECODE_CACHE", " true "),
    ("SAVE_DECODE_CACHE", "yes"),
    ("SAVE_DECODE_CACHE", "TRUE"),
    ("REMOTE_SERDE", '"cachegen"'),
    ("LOOKUP_SERVER_WORKER_IDS", "1,2"),
    ("LOOKUP_SERVER_WORKER_IDS", "[1, 2]"),
    ("BOGUS_PROBE_KEY", "1"),
)


def _old_names(schema: ReleaseSchema) -> dict[str, Any]:
    """Every old name with a value of the key it would land in; targets used once."""
    out: dict[str, Any] = {}
    used: set[str] = set()
    names = [*schema.aliases, *schema.deprecated, *schema.file_fallbacks]
    for name in dict.fromkeys(names):
        target = (
            schema.aliases.get(name) or schema.file_fallbacks.get(name) or name
        )  # where the value could go
        if name in schema.keys:
            target = name
        if target in used:
            continue
        used.add(target)
        out[name] = _sample(schema, target) if target in schema.keys else "probe"
    out[BOGUS] = 1
    return out


def build_request(schema: ReleaseSchema) -> dict[str, Any]:
    probes: dict[str, Any] = {}
    old = _old_names(schema)
    probes["old_names"] = {"file": yaml.safe_dump(old, sort_keys=False), "read": list(schema.keys)}
    for i, (key, text) in enumerate(VALUE_CASES):
        if key in schema.keys:
            probes[f"value_{i}"] = {"file": f"{key}: {text}\n", "read": [key]}
    prefix = schema.loader.env_prefix or "LMCACHE_"
    for i, (suffix, text) in enumerate(ENV_CASES):
        key = suffix.lower()
        if key not in schema.keys and suffix != BOGUS.upper():
            continue
        env = {prefix + suffix: text}
        read = [key] if key in schema.keys else []
        probes[f"env_{i}"] = {"env": env, "file": None, "read": read}
        if schema.loader.env_with_file == "overrides":
            probes[f"env_over_file_{i}"] = {"env": env, "file": "chunk_size: 256\n", "read": read}
    if schema.loader.env_reads_aliases:
        for name, value in old.items():
            if name in schema.aliases:
                text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                target = schema.aliases[name]
                probes[f"env_alias_{name}"] = {
                    "env": {prefix + name.upper(): text},
                    "file": None,
                    "read": [k for k in (name, target) if k in schema.keys],
                }
    migrated = _round_trip(schema)
    probes["round_trip"] = {"file": migrated, "read": list(schema.keys)}
    return {"probes": probes}


def _round_trip(schema: ReleaseSchema) -> str:
    source = load_schemas().row("0.3.5")
    doc = read_config_bytes(ROUND_TRIP_SOURCE.encode(), "round trip")
    return migrate_text(ROUND_TRIP_SOURCE, plan_migration(doc, schema, source), "round trip")


def run_probe(request: dict[str, Any], site: Path | None = None) -> dict[str, Any]:
    """Run the probe with this interpreter (LMCache from ``site`` first when given)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(request, fh)
    env = dict(os.environ)
    env.update(LMCACHE_DISABLE_BANNER="1", PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            [sys.executable, str(MAIN), fh.name, *([str(site)] if site else [])],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tempfile.gettempdir(),
            check=False,
        )
    finally:
        os.unlink(fh.name)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- what lmcache-compat predicts ---------------------------------------------------------------


def _unknown_names(messages: list[str]) -> set[str]:
    out = set()
    for m in messages:
        if "Unknown configuration key" in m:
            out.add(m.split("Unknown configuration key:", 1)[1].split("(", 1)[0].strip())
    return out


def _deprecated_names(schema: ReleaseSchema, messages: list[str], names: list[str]) -> set[str]:
    return {
        n
        for n in names
        if any("deprecated" in m and n in m for m in messages)
        and not any(f"Unknown configuration key: {n}" in m for m in messages)
    }


def _expected_value(schema: ReleaseSchema, key: str, value: Any, env: bool) -> tuple[str, Any]:
    """``("value", v)``, ``("lost", None)`` (a warning, not set) or ``("error", name)``."""
    spec = schema.keys[key]
    if not env and schema.loader.file_values == "raw" and spec.converter is None:
        return "value", value
    if env and schema.loader.env_unquotes and isinstance(value, str):
        text = value.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            value = text[1:-1]
    converter = spec.env_converter if env else spec.converter
    conversion = convert(converter, value)
    if conversion.error is None:
        return "value", conversion.value
    if env:
        return ("error", conversion.error) if schema.style == "fields" else ("lost", None)
    if schema.loader.conversion_error == "none" and conversion.error in CAUGHT:
        return "value", None
    return "error", conversion.error


def _one_message(text: str) -> str:
    """A deprecation message; a one-element tuple's repr (0.3.10.post1 ... 0.3.11) unwrapped."""
    if text.startswith("(") and text.endswith(",)"):
        value = ast.literal_eval(text)
        if isinstance(value, tuple) and len(value) == 1:
            return str(value[0])
    return text


def _same(real: Any, expected: Any) -> bool:
    if isinstance(expected, float) or isinstance(real, float):
        return isinstance(real, (int, float)) and abs(float(real) - float(expected)) < 1e-9
    return bool(real == expected and type(real) is type(expected))


def mismatches(schema: ReleaseSchema, request: dict[str, Any], real: dict[str, Any]) -> list[str]:
    """Every way the real loaders disagree with the shipped schema and the model (empty: none)."""
    out: list[str] = []
    keys = real["definitions"] if real["definitions"] is not None else real["fields"]
    if keys != list(schema.keys):
        out.append(f"keys: real {keys} != shipped {list(schema.keys)}")
    if (real["aliases"] or {}) != dict(schema.aliases):
        out.append(f"aliases: real {real['aliases']} != shipped {dict(schema.aliases)}")
    deprecated = {k: _one_message(v) for k, v in real["deprecated"].items()}
    if deprecated != dict(schema.deprecated):
        out.append(f"deprecated: real {real['deprecated']} != shipped {dict(schema.deprecated)}")
    if real["table_defaults"] is not None:
        for key, spec in schema.keys.items():
            if (
                not isinstance(spec.default, dict)
                and real["table_defaults"].get(key) != spec.default
            ):
                out.append(f"default of {key}: real {real['table_defaults'].get(key)!r}")
    for name, probe in request["probes"].items():
        out += [f"{name}: {m}" for m in _judge_probe(schema, name, probe, real["probes"][name])]
    return out


def _judge_probe(
    schema: ReleaseSchema, name: str, probe: dict[str, Any], got: dict[str, Any]
) -> list[str]:
    env = bool(probe.get("env"))
    if not env:
        return _judge_file(schema, name, probe, got)
    return _judge_env(schema, probe, got)


def _judge_file(
    schema: ReleaseSchema, name: str, probe: dict[str, Any], got: dict[str, Any]
) -> list[str]:
    out: list[str] = []
    mapping = yaml.safe_load(probe["file"]) or {}
    warnings = got["warnings"]
    predicted_unknown = {
        str(k)
        for k in mapping
        if resolve_name(schema, str(k)).log == "unknown"
        and not (schema.loader.ec and str(k).startswith(schema.loader.ec.file_prefix))
    }
    if _unknown_names(warnings) != predicted_unknown:
        out.append(f"unknown-key warnings {sorted(_unknown_names(warnings))}, predicted "
                   f"{sorted(predicted_unknown)}")  # fmt: skip
    predicted_deprecated = {
        str(k) for k in mapping if resolve_name(schema, str(k)).log == "deprecation"
    }
    seen_deprecated = _deprecated_names(schema, warnings, [str(k) for k in mapping])
    if seen_deprecated != predicted_deprecated:
        out.append(f"deprecation warnings {sorted(seen_deprecated)}, predicted "
                   f"{sorted(predicted_deprecated)}")  # fmt: skip
    # where each value lands, or the error the load raises
    expected: dict[str, tuple[str, Any]] = {}
    for raw, value in mapping.items():
        outcome = resolve_name(schema, str(raw))
        if outcome.key is not None and (
            outcome.key not in expected or outcome.rule.reads_as != "fallback"
        ):
            expected[outcome.key] = _expected_value(schema, outcome.key, value, env=False)
    errors = [e[1] for e in expected.values() if e[0] == "error"]
    if errors:
        if got.get("error") is None:
            out.append(f"predicted the load to fail with {errors}, it read {got.get('values')}")
        elif got["error"] not in errors and not (
            got["error"] == "JSONDecodeError" and "ValueError" in errors
        ):
            out.append(f"load failed with {got['error']}, predicted {errors}")
        return out
    if "error" in got:
        return [*out, f"load failed: {got['error']}: {got.get('message')}"]
    for key, (_kind, value) in expected.items():
        if key in got["values"] and not _same(got["values"][key], value):
            out.append(f"{key}: real {got['values'][key]!r}, predicted {value!r}")
    if name == "round_trip":
        findings = {f.key for f in check_config(mapping, schema) if f.ignored}
        if _unknown_names(warnings) - findings:
            out.append(f"unknown keys the check missed: {_unknown_names(warnings) - findings}")
    return out


def _judge_env(schema: ReleaseSchema, probe: dict[str, Any], got: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ((var, text),) = probe["env"].items()
    read = probe["read"]
    if not read:  # a variable the model says is never read: no warning about it, no failure
        if "error" in got:
            out.append(f"{var} made the load fail: {got['error']}")
        return out
    name = var[len(schema.loader.env_prefix or "") :].lower()
    outcome = resolve_name(schema, name, "env")
    if outcome.key is None:
        if any(v == text for v in got.get("values", {}).values()):
            out.append(f"{var} was read although the model drops it")
        return out
    key = outcome.key
    kind, value = _expected_value(schema, key, text, env=True)
    if kind == "error":
        if "error" not in got:
            out.append(f"predicted {value} from {var}={text!r}, it read {got['values']}")
        return out
    if "error" in got:
        return [f"{var}={text!r} made the load fail: {got['error']}: {got.get('message')}"]
    real = got["values"][key]
    if kind == "lost":
        if not got["warnings"]:
            out.append(f"{var}={text!r}: predicted a warning and the value lost, none logged")
        return out
    if not _same(real, value):
        out.append(f"{var}={text!r}: real {real!r}, predicted {value!r}")
    return out


# --- where the probe runs ------------------------------------------------------------------------


def extract_sources(sdist: Path, dest: Path) -> Path:
    """The ``lmcache/**/*.py`` files of an sdist, written under ``dest`` (regular files only:
    no links, no paths out of ``dest``); returns ``dest``."""
    import tarfile

    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or len(parts) < 3 or parts[1] != "lmcache":
                continue
            if not member.name.endswith(".py") or ".." in parts:
                continue
            target = dest.joinpath(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
    return dest


def probe_fails_without_torch(request: dict[str, Any], site: Path | None) -> str:
    """Run the probe where torch is absent; returns its error output (it must fail)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(request, fh)
    try:
        done = subprocess.run(
            [sys.executable, str(MAIN), fh.name, *([str(site)] if site else [])],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tempfile.gettempdir(),
            check=False,
        )
    finally:
        os.unlink(fh.name)
    assert done.returncode != 0, "the config module imported without torch"
    return done.stderr


def round_trip_plan(schema: ReleaseSchema) -> Any:
    doc = read_config_bytes(ROUND_TRIP_SOURCE.encode(), "round trip")
    return plan_migration(doc, schema, load_schemas().row("0.3.5"))


def unknown_warnings(real: dict[str, Any], probe: str) -> set[str]:
    return _unknown_names(real["probes"][probe]["warnings"])
