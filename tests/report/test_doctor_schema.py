"""``doctor --json`` follows the JSON Schema shipped in the package
(``lmcache_compat/report/doctor.schema.json``): real outputs of every doctor situation and of
this environment validate against it, the schema names exactly the fields of the typed object
(``DoctorJSON`` and its parts), and ``schema_version`` is the schema's."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.report.doctor import SCHEMA_VERSION
from lmcache_compat.report.doctor import schema as doctor_json
from lmcache_compat.report.doctor.config import ConfigJSON
from lmcache_compat.report.doctor.next_steps import NextStepJSON
from tests.support.json_schema import validate
from tools.doctor_scenarios import SCENARIOS, report


def _schema() -> dict[str, Any]:
    text = resources.files("lmcache_compat.report").joinpath("doctor.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


SCHEMA = _schema()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_situation_validates(name: str) -> None:
    data, _ = report(name)
    assert validate(data, SCHEMA) == []
    assert data["schema_version"] == SCHEMA_VERSION


def test_this_environment_validates(capsys: pytest.CaptureFixture[str]) -> None:
    main(["doctor", "--json"])
    assert validate(json.loads(capsys.readouterr().out), SCHEMA) == []


def test_an_mp_server_entry_validates() -> None:
    data, _ = report("both")
    bad = {**data, "mp_servers": [{"url": "http://h:1", "error": "x", "problem": "unreachable"}]}
    assert validate(bad, SCHEMA) == []
    assert validate({**data, "verdict": "fine"}, SCHEMA)  # the validator does refuse
    assert validate({**data, "surprise": 1}, SCHEMA)


@pytest.mark.parametrize(
    ("typed", "where"),
    [
        (doctor_json.DoctorJSON, None),
        (doctor_json.DistributionJSON, "distribution"),
        (doctor_json.ProviderJSON, "provider"),
        (doctor_json.MatrixStatusJSON, "matrix_status"),
        (doctor_json.EngineSourceJSON, "engine_source"),
        (doctor_json.ImportCheckJSON, "import_check"),
        (doctor_json.CapabilityJSON, "capability"),
        (doctor_json.IssueJSON, "issue"),
        (doctor_json.ServerJSON, "server"),
        (NextStepJSON, "next_step"),
        (ConfigJSON, "config"),
    ],
)
def test_the_schema_names_every_field(typed: type, where: str | None) -> None:
    part = SCHEMA if where is None else SCHEMA["$defs"][where]
    assert set(part["properties"]) == set(typed.__annotations__)


def test_schema_version_is_the_schema_major() -> None:
    major = SCHEMA_VERSION.split(".")[0]
    assert SCHEMA["properties"]["schema_version"]["pattern"].startswith(f"^{major}\\.")
