"""Text and JSON rendering of ``optkg evidence`` results (kg.analyses.evidence)."""
from __future__ import annotations

import json
from typing import Any

from kg.analyses.evidence import Result, summary

SCHEMA_VERSION = 1


def to_text(results: list[Result], engine: str | None, release: str | None, pending: list[str] | None = None,
            unpinned: dict[str, str] | None = None) -> str:
    """One line per moved or gone item, then the counts; found items are counted, not listed; then the engine
    rules marked ``evidence_todo`` (nothing to check for them yet) and the ``evidence_unpinned`` ones (no released
    source backs them: listed with the reason, never counted as found)."""
    counts = summary(results)
    what = f"{engine or 'all engines'}" + (f" {release}" if release else " (each item at its own release)")
    out = [f"optkg evidence: {len(results)} item(s) checked for {what}"]
    for r in results:
        if r.status == "found":
            continue
        i = r.item
        where = f"{i.package} {r.checked_release} {i.path}"
        if r.status == "moved":
            out.append(f"MOVED {i.owner}: {where}: line {i.line} -> {', '.join(map(str, r.lines[:5]))}: {i.snippet!r}")
        else:
            out.append(f"GONE  {i.owner}: {where}: {r.note}: {i.snippet!r} (recorded at {i.release}"
                       + (f" line {i.line}" if i.line else "") + ")")
    out.append(f"found {counts['found']}, moved {counts['moved']}, gone {counts['gone']}")
    if pending:
        out.append(f"not checked: {len(pending)} engine rule(s) without evidence yet (evidence_todo): {', '.join(sorted(pending))}")
    if unpinned:
        out.append(f"unpinned: {len(unpinned)} engine rule(s) rest on public docs or issues, not on a released source "
                   f"(nothing verified):")
        out += [f"  {rid}: {unpinned[rid]}" for rid in sorted(unpinned)]
    return "\n".join(out) + "\n"


def to_json(results: list[Result], engine: str | None, release: str | None, pending: list[str] | None = None,
            unpinned: dict[str, str] | None = None) -> str:
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "engine": engine, "release": release,
                           "summary": summary(results), "items": [r.to_dict() for r in results],
                           "rules_without_evidence": sorted(pending or []),
                           "rules_unpinned": [{"rule": rid, "reason": (unpinned or {})[rid]} for rid in sorted(unpinned or {})]}
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"
