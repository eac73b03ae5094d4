"""Finding filters for CI adoption: --select/--ignore (rule id, tag or severity), baselines, --fail-on.

Used by ``check`` (findings: ``rule_id``), ``validate`` (problems: check ``code``) and ``place``
(placement results: ``rule_id`` place-*). An item is a dict with ``rule_id`` or ``code``,
``severity``, ``tags`` and ``fingerprint``.

A baseline is a JSON file ``{"schema_version": "1.0", "fingerprints": [...]}``; a finding whose
``fingerprint`` (rule id + techniques + numbers) is listed is hidden and counted as suppressed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import OptkgError
from .rules import SEVERITY_ORDER


def _terms(values: list[str]) -> set[str]:
    return {t.strip() for v in values for t in v.split(",") if t.strip()}


def _hits(f: dict[str, Any], terms: set[str]) -> bool:
    keys = {f.get("rule_id"), f.get("code"), f.get("severity"), *f.get("tags", [])}
    return bool(keys & terms)


def read_baseline(path: Path) -> set[str]:
    from .yamlio import read_text
    try:
        d = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise OptkgError(f"{path}:{e.lineno}: invalid JSON in baseline ({e.msg})") from None
    if not isinstance(d, dict) or not isinstance(d.get("fingerprints"), list):
        raise OptkgError(f"{path}: a baseline is {{\"schema_version\": \"1.0\", \"fingerprints\": [...]}}")
    return {str(x) for x in d["fingerprints"]}


def write_baseline(path: Path, findings: list[dict[str, Any]], force: bool = False) -> None:
    from .yamlio import atomic_write
    body = {"schema_version": "1.0", "fingerprints": sorted({f["fingerprint"] for f in findings})}
    atomic_write(path, json.dumps(body, indent=2) + "\n", force=force)


def apply_filters(findings: list[dict[str, Any]], select: list[str], ignore: list[str],
                  baseline: Path | None) -> tuple[list[dict[str, Any]], int]:
    """Return (kept findings, number suppressed)."""
    sel, ign = _terms(select), _terms(ignore)
    base = read_baseline(baseline) if baseline else set()
    kept = []
    for f in findings:
        if sel and not _hits(f, sel):
            continue
        if ign and _hits(f, ign):
            continue
        if f.get("fingerprint") in base:
            continue
        kept.append(f)
    return kept, len(findings) - len(kept)


def fail_code(items: list[dict[str, Any]], fail_on: str, key: str = "severity") -> int:
    """1 when any item's severity is at or above ``fail_on`` ('never' disables), else 0."""
    if fail_on == "never":
        return 0
    limit = SEVERITY_ORDER[fail_on]
    return 1 if any(SEVERITY_ORDER.get(str(i.get(key)), 0) >= limit for i in items) else 0
