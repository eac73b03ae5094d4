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

from kg.core.errors import OptkgError
from kg.engine.rules import SEVERITY_ORDER


def _terms(values: list[str]) -> set[str]:
    return {t.strip() for v in values for t in v.split(",") if t.strip()}


def _hits(f: dict[str, Any], terms: set[str]) -> bool:
    keys = {f.get("rule_id"), f.get("code"), f.get("severity"), *f.get("tags", [])}
    return bool(keys & terms)


def read_baseline(path: Path) -> set[str]:
    from kg.core.numparse import loads_json
    from kg.core.yamlio import read_text
    d = loads_json(read_text(path), str(path))  # bounded: no NaN, no 5,000-digit ints, at most 64 levels deep
    if not isinstance(d, dict) or not isinstance(d.get("fingerprints"), list):
        raise OptkgError(f"{path}: a baseline is {{\"schema_version\": \"1.0\", \"fingerprints\": [...]}}")
    return {str(x) for x in d["fingerprints"]}


def write_baseline(path: Path, findings: list[dict[str, Any]], force: bool = False) -> None:
    from kg.core.yamlio import atomic_write
    body = {"schema_version": "1.0", "fingerprints": sorted({f["fingerprint"] for f in findings})}
    atomic_write(path, json.dumps(body, indent=2) + "\n", force=force)


def known_terms(rules_dir: Path | None = None) -> set[str]:
    """Every term --select/--ignore can match: severities, rule ids, aliases and tags of every
    ruleset (``rules_dir``, default the shipped rules/), ``optkg validate`` check codes and tags,
    and the ``optkg place`` result ids."""
    from kg.engine.rules import RULESET_KINDS, load_ruleset
    terms = set(SEVERITY_ORDER) | {"placement"}
    from kg.knowledge.checks import CHECKS
    for c in CHECKS.values():
        terms.add(c.code)
        terms.update(c.tags)
    from kg.analyses.place import PLACE_RULES
    terms.update(PLACE_RULES)
    for kind in RULESET_KINDS:
        for folder in {rules_dir, None}:
            try:
                rs = load_ruleset(kind, folder)
            except OptkgError:  # an invalid rules folder is reported by the command itself
                continue
            for r in rs.rules:
                terms.add(r.id)
                terms.update(r.aliases)
                terms.update(r.tags)
    return terms


def check_terms(select: list[str], ignore: list[str], known: set[str] | None = None,
                rules_dir: Path | None = None) -> None:
    """OptkgError when a --select/--ignore term matches no rule id, tag, severity or check code.

    A misspelt --select would otherwise hide every finding and pass CI; the message lists close
    matches. ``known`` defaults to ``known_terms(rules_dir)``.
    """
    for flag, values in (("--select", select), ("--ignore", ignore)):
        terms = _terms(values)
        if not terms:
            continue
        from difflib import get_close_matches  # only for terms given (a check without --select does not load it)
        if known is None:
            known = known_terms(rules_dir)
        for t in sorted(terms - known):
            # cutoff 0.75: 'nonsense' vs the band 'none' scores 0.67 and is no suggestion; a real slip
            # such as 'kv-capcity' vs 'kv-capacity' scores 0.95
            near = get_close_matches(t, sorted(known), n=3, cutoff=0.75)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise OptkgError(f"{flag}: '{t}' matches no rule id, tag, severity or check code{hint}")


def apply_filters(findings: list[dict[str, Any]], select: list[str], ignore: list[str],
                  baseline: Path | None, known: set[str] | None = None,
                  rules_dir: Path | None = None,
                  never_baselined: tuple[str, ...] = ()) -> tuple[list[dict[str, Any]], int]:
    """Return (kept findings, number suppressed). Raises OptkgError for a --select/--ignore term
    that names nothing (``check_terms``). A finding whose severity is in ``never_baselined``
    (``optkg validate`` passes ``("error",)``: an unusable catalog cannot be accepted) is kept
    even when the baseline lists its fingerprint."""
    check_terms(select, ignore, known, rules_dir)
    sel, ign = _terms(select), _terms(ignore)
    base = read_baseline(baseline) if baseline else set()
    kept = []
    for f in findings:
        if sel and not _hits(f, sel):
            continue
        if ign and _hits(f, ign):
            continue
        if f.get("fingerprint") in base and f.get("severity") not in never_baselined:
            continue
        kept.append(f)
    return kept, len(findings) - len(kept)


def fail_code(items: list[dict[str, Any]], fail_on: str, key: str = "severity") -> int:
    """1 when any item's severity is at or above ``fail_on`` ('never' disables), else 0."""
    if fail_on == "never":
        return 0
    limit = SEVERITY_ORDER[fail_on]
    return 1 if any(SEVERITY_ORDER.get(str(i.get(key)), 0) >= limit for i in items) else 0
