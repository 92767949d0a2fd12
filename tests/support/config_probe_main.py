"""Run the real configuration loaders of one LMCache release and print what they did (JSON).

    python tests/support/config_probe_main.py REQUEST.json [SITE_DIR]

A subprocess of the ``releases`` and ``grid-vllm0.32.0`` tiers (``tests/support/config_probes.py``
builds the request and judges the result). Imports only ``lmcache.v1.config`` (from
``SITE_DIR`` first when given: the grid tier's ``--target`` installs, or an sdist's extracted
sources). For each probe it loads a YAML file with ``from_file`` (and, for an environment
probe, sets the variables and runs ``from_env``, or ``from_file`` then
``update_config_from_env`` where the release has it) and records the values of the keys asked
for, the exception if the load raised, and every warning the loaders logged.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import tempfile
from typing import Any


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return {"repr": repr(value)}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            try:
                self.messages.append(record.getMessage())
            except Exception:  # a record whose arguments do not format: keep its text
                self.messages.append(str(record.msg))


def _clean_env() -> None:
    for key in list(os.environ):
        if key.startswith("LMCACHE_"):
            del os.environ[key]
    os.environ["LMCACHE_TRACK_USAGE"] = "false"


def main(request_path: str, site: str | None) -> int:
    if site:
        sys.path.insert(0, site)
    _clean_env()
    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    with contextlib.redirect_stdout(io.StringIO()):
        from lmcache.v1 import config  # the module under test

    capture = _Capture()
    logging.getLogger().addHandler(capture)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("lmcache") and isinstance(logger, logging.Logger):
            logger.addHandler(capture)
            logger.setLevel(logging.DEBUG)
    cls = config.LMCacheEngineConfig
    definitions = getattr(config, "_CONFIG_DEFINITIONS", None)
    out: dict[str, Any] = {
        "fields": list(getattr(cls, "__dataclass_fields__", {})),
        "definitions": list(definitions) if definitions is not None else None,
        "aliases": getattr(config, "_CONFIG_ALIASES", None),
        "deprecated": {
            k: v if isinstance(v, str) else repr(v)
            for k, v in (getattr(config, "_DEPRECATED_CONFIGS", None) or {}).items()
        },
        "table_defaults": (
            {k: _jsonable(v.get("default")) for k, v in definitions.items()}
            if definitions is not None
            else None
        ),
        "probes": {},
    }
    tmp = tempfile.mkdtemp()
    for name, probe in request["probes"].items():
        capture.messages.clear()
        _clean_env()
        path = None
        if probe.get("file") is not None:
            path = os.path.join(tmp, f"{name}.yaml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(probe["file"])
        os.environ.update(probe.get("env", {}))
        result: dict[str, Any] = {}
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if path is None:
                    cfg = cls.from_env()
                else:
                    cfg = cls.from_file(path)
                    if probe.get("env") and hasattr(cfg, "update_config_from_env"):
                        cfg.update_config_from_env()
            result["values"] = {k: _jsonable(getattr(cfg, k, "<absent>")) for k in probe["read"]}
        except BaseException as exc:  # what the release raises is the observation
            result["error"] = type(exc).__name__
            result["message"] = str(exc)[:300]
        result["warnings"] = [m[:400] for m in capture.messages]
        out["probes"][name] = result
    _clean_env()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
