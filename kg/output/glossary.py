"""The glossary of terms and abbreviations (``catalog/glossary.yaml``): which ones a report uses, and docs/glossary.md.

A report lists the terms it used at its end with their one-line meaning and their anchor in docs/glossary.md;
the HTML pages link each term to the same anchor of ``glossary.html`` in the explorer.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_TERMS: list[dict[str, Any]] | None = None


def anchor(term: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


def terms(path: Path | None = None) -> list[dict[str, Any]]:
    """Every entry of ``path`` (default: the catalog's glossary.yaml): ``{term, match, short, long, source, anchor}``."""
    global _TERMS
    if path is not None or _TERMS is None:
        from kg.core import cache, paths
        from kg.core.yamlio import load_yaml
        f = Path(path or paths.catalog_dir() / "glossary.yaml")
        data = cache.built_from("glossary", [f], lambda: load_yaml(f).data or {})  # parsed once per content
        got = [dict(t, anchor=anchor(str(t["term"]))) for t in data.get("terms") or []]
        if path is not None:
            return got
        _TERMS = got
    return _TERMS


def terms_in(text: str) -> list[dict[str, Any]]:
    """The glossary entries whose ``match`` occurs in ``text``, in glossary order."""
    return [t for t in terms() if re.search(t["match"], text)]


def render_markdown(path: Path | None = None) -> str:
    """docs/glossary.md: one section per term, its anchor the one reports and pages link to."""
    out = ["# Glossary", "", "Terms and abbreviations in optkg's reports.", ""]
    for t in terms(path):
        out.append(f'<a id="{t["anchor"]}"></a>')
        out.append(f"## {t['term']}")
        out.append("")
        out.append(" ".join(str(t["long"]).split()))
        src = t.get("source") or {}
        if src:
            out.append("")
            out.append(f"Source: [{src.get('title')}]({src.get('url')})")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
