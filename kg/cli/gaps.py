"""List the empty stage x layer x dimension cells, ranked as candidate new directions, with reasons.

The ranking runs through the rule engine (rules/gaps.yaml): each rule that fires for a cell is one
reason, its severity band adds to the score. Cells that ``cell_annotations`` in axes.yaml mark
impossible or out-of-scope are listed apart, not as directions. Exit 0 (gaps are information),
2 on bad input.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.errors import OptkgError
from kg.cli.common import add_catalog_arg, load_clean_catalog, parse_thresholds, write_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_catalog_arg(p)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--stage", action="append", default=[], help="only cells of these stages (repeatable, comma-separated)")
    p.add_argument("--layer", action="append", default=[], help="only cells of these layers")
    p.add_argument("--dimension", action="append", default=[], help="only cells of these dimensions")
    p.add_argument("--top", type=int, help="list only the N most promising directions")
    p.add_argument("--threshold", action="append", default=[], metavar="NAME=NUMBER",
                   help="override a threshold of rules/gaps.yaml (repeatable)")
    p.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting the output file")


def _split(values: list[str], flag: str) -> list[str]:
    """Comma-separated values of a repeatable flag; a flag given with no value at all (``--stage ',,,'``) is an
    error, not "no filter" (issue 26 #28)."""
    out = [t.strip() for v in values for t in v.split(",") if t.strip()]
    if values and not out:
        raise OptkgError(f"{flag}: no value in {values[0][:40]!r} (give names separated by commas, or drop {flag})")
    return out


def run(args: argparse.Namespace) -> int:
    from kg.analyses.gaps import find_gaps, render_markdown, render_text
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset

    if args.top is not None and args.top < 1:
        raise OptkgError(f"--top: expected a positive integer, found {args.top}")
    catalog = load_clean_catalog(args)
    rules = load_ruleset("gaps", args.rules)
    report = find_gaps(catalog, rules, stages=_split(args.stage, "--stage"), layers=_split(args.layer, "--layer"),
                       dimensions=_split(args.dimension, "--dimension"), thresholds=parse_thresholds(args.threshold), top=args.top)
    if args.format == "json":
        text = to_json(report)
    elif args.format == "markdown":
        text = render_markdown(report)
    else:
        text = render_text(report, catalog.axes)
    write_output(text, args.output, force=args.force)
    return 0
