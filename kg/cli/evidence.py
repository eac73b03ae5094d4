"""Check every evidence item of the engine rules and engine tables against the released wheel: found, moved or gone.

Exit codes: 0 nothing gone, 1 some item gone (or moved with --fail-on moved), 2 usage or input error.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.textsafe import fit_width


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", help="only this engine's evidence (vllm, sglang, trtllm)")
    p.add_argument("--release", help="check the items that claim this release against its wheel "
                                     "(a release newer than any recorded one checks the newest knowledge); needs --engine")
    p.add_argument("--rules", type=Path, default=None, help="rules folder (default: the shipped rules/)")
    p.add_argument("--catalog", type=Path, default=None, help="catalog folder (default: the shipped catalog/)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="where pip download puts wheels (default $OPTKG_CACHE_DIR/wheels, else ~/.cache/optkg/wheels)")
    p.add_argument("--wheel-dir", type=Path, action="append", default=[],
                   help="a folder of already downloaded wheels, searched first (repeatable)")
    p.add_argument("--offline", action="store_true", help="never run pip; use --wheel-dir and the cache only")
    p.add_argument("--fail-on", choices=("gone", "moved"), default="gone", help="exit 1 on gone items (default) or on moved too")
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    import sys

    from kg.analyses.evidence import (items_from_engine_checks, items_from_engine_tables, items_from_release_tables,
                                      items_from_rules, run as check, summary)
    from kg.core import paths
    from kg.core.errors import OptkgError
    from kg.engine.rules import RULESET_KINDS, folder_files, invalid_rules, load_rules
    from kg.output.evidence_report import to_json, to_text

    rules_dir = args.rules or paths.rules_dir()
    folder_files(rules_dir)  # a file, a missing or an empty folder: refused before any wheel is fetched
    catalog_dir = args.catalog or paths.catalog_dir()
    items = []
    pending = []
    unpinned: dict[str, str] = {}
    for kind in RULESET_KINDS:
        rs, problems = load_rules(kind, rules_dir)
        if problems:
            raise invalid_rules(problems, rules_dir)
        rules = rs.rules
        items += items_from_rules(rules)
        pending += [r.id for r in rules if getattr(r, "evidence_todo", "") and not r.evidence
                    and (not args.engine or args.engine in ((r.applies_to or {}).get("engines") or []))]
        unpinned.update({r.id: r.evidence_unpinned for r in rules if r.evidence_unpinned and not r.evidence
                         and (not args.engine or args.engine in ((r.applies_to or {}).get("engines") or []))})
    items += items_from_engine_tables(Path(catalog_dir) / "engines")
    items += items_from_engine_checks(Path(catalog_dir) / "engines" / "checks")
    items += items_from_release_tables(Path(catalog_dir) / "engines" / "releases")
    if args.engine and not any(i.engine == args.engine for i in items) and not unpinned:
        known = sorted({i.engine for i in items})
        from difflib import get_close_matches
        near = get_close_matches(args.engine, known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]}? " if near else ""
        raise OptkgError(f"--engine: no evidence for engine '{args.engine}'; {hint}(engines with evidence: "
                         f"{', '.join(known)})")
    results = check(items, args.engine, args.release, args.cache_dir, args.wheel_dir, args.offline) \
        if any(i.engine == args.engine for i in items) or not args.engine else []
    if not results and unpinned and not args.release:
        # an engine whose rules all rest on public docs or issues (trtllm): say so, and that nothing was verified
        sys.stdout.write(to_json(results, args.engine, args.release, pending, unpinned) if args.format == "json"
                         else fit_width(to_text(results, args.engine, args.release, pending, unpinned)))
        return 0
    if not results:
        raise OptkgError("no evidence item matches" + (f" {args.engine}" if args.engine else "")
                         + (f" {args.release}" if args.release else "") + "; nothing was checked")
    sys.stdout.write(to_json(results, args.engine, args.release, pending, unpinned) if args.format == "json"
                     else fit_width(to_text(results, args.engine, args.release, pending, unpinned)))
    counts = summary(results)
    return 1 if counts["gone"] or (args.fail_on == "moved" and counts["moved"]) else 0
