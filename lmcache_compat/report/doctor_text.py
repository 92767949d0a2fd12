"""The text of ``lmcache-compat doctor``, rendered from its JSON object
(:meth:`lmcache_compat.report.doctor.DoctorReport.to_json`): everything printed is in the JSON."""

from __future__ import annotations

from collections.abc import Sequence

from lmcache_compat.mp.server import ROUTE
from lmcache_compat.report.doctor_config import ConfigJSON
from lmcache_compat.report.doctor_json import DoctorJSON, IssueJSON, ServerJSON
from lmcache_compat.upstream.known_issues import issue

__all__ = ["format_config", "format_doctor", "format_mp_servers", "format_sglang", "format_verdict"]

_EXPECTATION_WORDS = {"yes": "yes", "no": "NO", "maybe": "maybe", "unknown": "unknown"}


def format_doctor(report: DoctorJSON) -> str:
    """The human-readable ``doctor`` output (everything in it is in the JSON object)."""
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
        f"  LMCache         {lm or 'not installed'}{extra}",
        f"  vLLM            {report['vllm'] or 'not installed'}",
        f"  sglang          {report['sglang'] or 'not installed'}",
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
    lines += ["", f"Capabilities ({report['capabilities_basis']}):"]
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
    for r in rows:
        lines.append(
            f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
        )
    lines += ["", *format_config(report["config"])]
    vllm_issues = [i for i in report["issues"] if not i["connector_key"].startswith("sglang")]
    if report["vllm"] is not None or report["sglang"] is None:
        lines += ["", *format_verdict(report["vllm"], lm, report["vllm_verdict"], vllm_issues)]
    if report["sglang_integration"] is not None:
        lines += ["", *format_sglang(report)]
    for note in report["notes"]:
        lines += ["", f"Note: {note}"]
    return "\n".join(lines)


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
    lines = []
    for entry in entries:
        url, release, client = entry["url"], entry.get("release"), entry.get("client")
        if "error" in entry:
            state = f"NOT reachable: {entry['error']}"
        elif release is None:
            state = (
                f"release not reported (no {ROUTE}: a release before that route, or not an "
                "LMCache MP front end)"
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
    if not findings:
        lines.append("  nothing would be ignored, renamed or read differently")
    elif ignored:
        lines.append(f"  {ignored} would be ignored: lmcache-compat config check shows the same")
    return lines
