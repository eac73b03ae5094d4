"""The engines' own incompatibility checks, as data, and which optkg rule covers each.

``scan_wheel`` lists every explicit "X is incompatible with / not supported with / mutually exclusive with Y"
message in an engine's configuration code inside its released wheel (``PATTERN`` over the files under
``roots``, comment lines skipped); the result is kept in ``catalog/engines/checks/<engine>-<release>.yaml``::

    engine: vllm
    release: "0.33.0"
    package: vllm
    scanned: {roots: [vllm/config/, vllm/engine/arg_utils.py], pattern: "..."}
    checks:
      - id: vllm-config-vllm-1214          # <engine>-<file stem path>-<line>, stable for one release
        path: vllm/config/vllm.py
        line: 1214
        snippet: '"--enable-return-routed-experts is incompatible with "'   # the matched source line, stripped
        message: "--enable-return-routed-experts is incompatible with ..."  # the joined string literal
        covered_by: [routed-experts-with-context-parallel]                 # rule ids, or:
        not_covered: "no optkg fact for watermarking"

``load_checks`` reads those files; ``coverage`` joins them with the rules (an id in ``covered_by`` must be a
rule). The snippets are evidence items (kg.analyses.evidence checks them like rule evidence).
"""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kg.core.errors import OptkgError

PATTERN = (r"incompatible with|not supported with|not compatible with|cannot be used with|cannot be combined with"
           r"|mutually exclusive|not supported together")
_STRING = re.compile(r"""^\s*(?:raise \w+\(|[\w.]+\()?\s*[rbuf]*(["'])(.*?)(?<!\\)\1""")


@dataclass
class EngineCheck:
    id: str
    path: str
    line: int
    snippet: str
    message: str
    covered_by: list[str] = field(default_factory=list)
    not_covered: str = ""


def _message(lines: list[str], i: int) -> str:
    """The string literal that starts on line ``i`` (0-based) and its continuation lines, joined."""
    parts = []
    for ln in lines[i:i + 6]:
        m = _STRING.match(ln)
        if not m:
            if parts:
                break
            continue
        parts.append(m.group(2))
        if ln.rstrip().endswith((")", ",")) and parts:
            break
    return " ".join(" ".join(parts).split())[:400]


def scan_text(path: str, text: str, engine: str, pattern: str = PATTERN) -> list[EngineCheck]:
    rx = re.compile(pattern)
    lines = text.splitlines()
    out = []
    stem = re.sub(r"[^a-z0-9]+", "-", path.rsplit(".", 1)[0].split("/", 1)[-1].lower()).strip("-")
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith("#") or not rx.search(ln):
            continue
        if '"' not in ln and "'" not in ln:
            continue  # the phrase in code, not in a message
        snippet = ln.strip()[:300]
        out.append(EngineCheck(f"{engine}-{stem}-{i + 1}", path, i + 1, snippet, _message(lines, i) or snippet))
    return out


def scan_wheel(wheel: Path, engine: str, roots: Iterable[str], pattern: str = PATTERN) -> list[EngineCheck]:
    """Every message matching ``pattern`` in the ``.py`` files of ``wheel`` under ``roots`` (prefixes), in path order."""
    roots = list(roots)
    out: list[EngineCheck] = []
    try:
        with zipfile.ZipFile(wheel) as z:
            for name in sorted(z.namelist()):
                if name.endswith(".py") and any(name == r or name.startswith(r) for r in roots):
                    out.extend(scan_text(name, z.read(name).decode("utf-8", errors="replace"), engine, pattern))
    except (OSError, zipfile.BadZipFile) as e:
        raise OptkgError(f"{wheel}: not a readable wheel ({e})") from None
    return out


def load_checks(folder: Path) -> list[dict[str, Any]]:
    """Every ``<engine>-<release>.yaml`` in ``folder`` as {engine, release, package, checks: [EngineCheck], file}."""
    from kg.core.yamlio import load_yaml
    out = []
    for f in sorted(Path(folder).glob("*.yaml")):
        d = load_yaml(f).data
        if not isinstance(d, dict) or not d.get("engine") or not d.get("release"):
            raise OptkgError(f"{f}:1: an engine checks file needs engine: and release:")
        checks = []
        for i, c in enumerate(d.get("checks") or []):
            if not isinstance(c, dict) or not all(k in c for k in ("id", "path", "line", "snippet")):
                raise OptkgError(f"{f}: checks[{i}] needs id, path, line and snippet")
            checks.append(EngineCheck(str(c["id"]), str(c["path"]), int(c["line"]), str(c["snippet"]),
                                      str(c.get("message") or c["snippet"]), [str(x) for x in c.get("covered_by") or []],
                                      str(c.get("not_covered") or "")))
        out.append({"engine": str(d["engine"]), "release": str(d["release"]),
                    "package": str(d.get("package") or d["engine"]), "checks": checks, "file": str(f)})
    return out


def coverage(check_files: list[dict[str, Any]], rule_ids: set[str]) -> list[dict[str, Any]]:
    """Per file: counts and each check's status (covered / not covered / unmapped) with the rules that cover it.

    A ``covered_by`` id that is not a rule is an error (OptkgError naming the file and check)."""
    out = []
    for cf in check_files:
        rows = []
        for c in cf["checks"]:
            missing = [r for r in c.covered_by if r not in rule_ids]
            if missing:
                raise OptkgError(f"{cf['file']}: check {c.id} names unknown rule(s) {', '.join(missing)}")
            status = "covered" if c.covered_by else ("not covered" if c.not_covered else "unmapped")
            rows.append({"check": c, "status": status})
        n = len(rows)
        cov = sum(1 for r in rows if r["status"] == "covered")
        out.append({**cf, "rows": rows, "total": n, "covered": cov,
                    "percent": round(100.0 * cov / n, 1) if n else 0.0})
    return out
