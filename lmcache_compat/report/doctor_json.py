"""The ``doctor --json`` object's shape (:class:`DoctorJSON` and its parts, typed) and how an
issue is shown in it: the contract of ``lmcache-compat doctor --json``, apart from the code that
gathers the facts (:mod:`lmcache_compat.report.doctor`) and the text rendered from it
(:mod:`lmcache_compat.report.doctor_text`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from lmcache_compat.report.doctor_config import ConfigJSON
from lmcache_compat.report.doctor_sglang import SGLANG_CONNECTORS, SglangJSON
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import Issue
from lmcache_compat.versions import Expectation
from lmcache_compat.vllm.plugin import CONNECTOR_NAME

if TYPE_CHECKING:  # TypedDict keys that may be absent (their annotations stay text at run time)
    from typing import NotRequired

__all__ = [
    "CONNECTORS",
    "CapabilityJSON",
    "DoctorJSON",
    "EngineSourceJSON",
    "ImportCheckJSON",
    "IssueJSON",
    "MatrixStatusJSON",
    "ServerJSON",
    "issue_json",
]

#: How each connector an issue concerns is shown.
CONNECTORS: dict[str, str] = {
    "vllm": loc.VLLM_LMCACHE_CONNECTOR.name,
    "vllm-native": f"{loc.VLLM_LMCACHE_CONNECTOR.name} (use_native=True)",
    "vllm-mp": loc.VLLM_LMCACHE_MP_CONNECTOR.name,
    "any": "any connector",
    "compat": CONNECTOR_NAME,
    **SGLANG_CONNECTORS,
}


class IssueJSON(TypedDict):
    """An issue as ``doctor --json`` shows it."""

    key: str
    connector: str
    connector_key: str
    severity: str
    problem: str
    fix: str
    fixes: list[str]
    source: str


def issue_json(found: Issue) -> IssueJSON:
    return {
        "key": found.key,
        "connector": CONNECTORS[found.connector],
        "connector_key": found.connector,
        "severity": found.severity,
        "problem": found.problem,
        "fix": found.fix,
        "fixes": [str(f) for f in found.fixes],
        "source": found.source,
    }


class CapabilityJSON(TypedDict):
    capability: str
    member: str
    since: str
    expected: Expectation
    #: Read from the installed files; ``None``: not scanned, or undecided (then ``unknown``).
    present: bool | None
    fallback: str
    impact: str
    note: NotRequired[str]
    unknown: NotRequired[str]


class MatrixStatusJSON(TypedDict):
    status: Literal["listed", "newer", "unlisted", "unknown"]
    newest: str
    prerelease: NotRequired[bool]


class EngineSourceJSON(TypedDict):
    source: str
    present: bool
    module: NotRequired[str]
    found_by: NotRequired[str]
    path: NotRequired[str]
    imports_with_installed_lmcache: NotRequired[bool]
    #: Several definitions match and none was chosen: their modules.
    candidates: NotRequired[list[str]]
    reason: NotRequired[str]


class ImportCheckJSON(TypedDict):
    checked: bool
    imports: NotRequired[list[str]]
    missing: NotRequired[list[str]]


class ServerJSON(TypedDict):
    url: str
    release: NotRequired[str | None]
    client: NotRequired[str | None]
    matches: NotRequired[bool | None]
    error: NotRequired[str]


class DoctorJSON(TypedDict):
    """The ``doctor --json`` object."""

    python: str
    python_executable: str
    lmcache_compat: str
    lmcache: str | None
    vllm: str | None
    sglang: str | None
    lmcache_in_matrix: MatrixStatusJSON | None
    engine_sources: list[EngineSourceJSON]
    vllm_connector_import: ImportCheckJSON | None
    capabilities_basis: str
    capabilities: list[CapabilityJSON]
    #: class -> the modules of the several matching definitions (none was chosen).
    ambiguous: dict[str, list[str]]
    #: Every engine's verdict together (broken if any is), and each one's.
    verdict: str
    vllm_verdict: str
    sglang_verdict: str | None
    issues: list[IssueJSON]
    notes: list[str]
    #: The active configuration against the installed release (``config check``'s findings).
    config: ConfigJSON
    #: sglang's own LMCache integration over the installed LMCache, and the backend's plan.
    sglang_integration: SglangJSON | None
    mp_servers: NotRequired[list[ServerJSON]]
