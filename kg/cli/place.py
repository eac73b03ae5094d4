"""Placement verdict for a technique file: its cells, replacement candidates or a new direction, couplings and changed findings.

Exit codes: 2 when the entry has problems (it is printed as ``optkg validate`` would) or the input
is bad; 1 when a placement result is at or above ``--fail-on`` (default: never, since a verdict is
advice, not a gate); else 0.
"""
from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = ("text", "json", "sarif", "markdown", "github")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="technique YAML file (in the catalog's techniques/ folder, or a draft elsewhere)")
    p.add_argument("--catalog", type=Path, default=None,
                   help="catalog folder (default: the one the file sits in, else the shipped catalog)")
    p.add_argument("--rules", type=Path, default=None, help="rules folder (default: the shipped rules/)")
    p.add_argument("--stack", action="append", type=Path, dest="stacks", metavar="FILE|DIR",
                   help="stack file or folder to re-check with and without the entry (repeatable; default: the shipped examples/)")
    p.add_argument("--no-stacks", action="store_true", help="do not re-check any stack")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--fail-on", choices=("info", "warning", "error", "never"), default="never",
                   help="exit 1 when a placement result is at or above this severity (default: never)")
    p.add_argument("--select", action="append", default=[], metavar="RULE|TAG|SEVERITY",
                   help="keep only placement results whose rule id, tag or severity matches")
    p.add_argument("--ignore", action="append", default=[], metavar="RULE|TAG|SEVERITY",
                   help="drop placement results whose rule id, tag or severity matches")
    p.add_argument("--baseline", type=Path, help="JSON file of accepted results to hide")
    p.add_argument("-o", "--output", type=Path, help="write the verdict here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting existing output files")


def run(args: argparse.Namespace) -> int:
    from kg.output.filtering import apply_filters, fail_code
    from kg.analyses.place import place_technique
    from kg.output.place_report import render_text
    from kg.output.report import to_json
    from kg.cli.common import write_output

    from kg.core.errors import OptkgError
    if args.no_stacks and args.stacks:
        raise OptkgError("--no-stacks and --stack contradict each other: drop one")
    stacks = [] if args.no_stacks else args.stacks
    d = place_technique(args.file, args.catalog, args.rules, stacks)
    if d.get("items"):
        d["items"], d["suppressed"] = apply_filters(d["items"], args.select, args.ignore, args.baseline)
    if args.format == "text":
        text = render_text(d)
    elif args.format == "json":
        text = to_json(d)
    else:
        from kg.output.formats import render
        text = render(args.format, "place", d)
    write_output(text, args.output, force=args.force)
    if d.get("problems"):
        return 2
    return fail_code(d.get("items") or [], args.fail_on)
