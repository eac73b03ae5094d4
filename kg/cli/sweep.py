"""Evaluate many TP/DCP/PP/KV-dtype combinations of one stack in one process, ranked best first.

Exit codes: 0 when at least one combination is valid and fits, 1 when none does, 2 on bad input.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.cli.common import add_catalog_arg, add_stack_args, load_clean_catalog, stack_from_args, write_output

FORMATS = ("text", "json", "csv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_stack_args(p)
    add_catalog_arg(p)
    p.add_argument("--tp", metavar="N,N,...", help="tp_size values, e.g. 1,2,4,8 (default: the stack's)")
    p.add_argument("--dcp", metavar="N,N,...", help="dcp_size values, e.g. 1,2,4 (default: the stack's)")
    p.add_argument("--pp", metavar="N,N,...", help="pp_size values (default: the stack's)")
    p.add_argument("--kv-cache-dtype", metavar="D,D,...", help="kv_cache_dtype values, e.g. auto,fp8 (default: the stack's)")
    p.add_argument("--invalid-on", choices=("info", "warning", "error"), default="error",
                   help="a finding at or above this severity marks a combination invalid (default: error)")
    p.add_argument("--only-valid", action="store_true", help="list only combinations that are valid and fit")
    p.add_argument("--top", type=int, metavar="N", help="list only the N best combinations")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("-o", "--output", type=Path, help="write the table here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting an existing output file")


def run(args: argparse.Namespace) -> int:
    from kg.core.errors import OptkgError
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset
    from kg.analyses.sweep import parse_int_list, parse_str_list, render_csv, render_text, sweep

    if args.top is not None and args.top < 1:
        raise OptkgError(f"--top: expected a positive integer, found {args.top}")
    tp = parse_int_list(args.tp, "--tp") if args.tp is not None else None
    dcp = parse_int_list(args.dcp, "--dcp") if args.dcp is not None else None
    pp = parse_int_list(args.pp, "--pp") if args.pp is not None else None
    kvdt = parse_str_list(args.kv_cache_dtype, "--kv-cache-dtype") if args.kv_cache_dtype is not None else None
    catalog = load_clean_catalog(args)
    rules = load_ruleset("check", args.rules)
    base = stack_from_args(args, catalog)
    result = sweep(base, catalog, rules, tp, dcp, pp, kvdt, invalid_on=args.invalid_on)
    d = result.to_dict()
    if args.only_valid:
        d["combinations"] = [c for c in d["combinations"] if c["valid"] and c["fits"]]
    if args.top is not None:
        d["combinations"] = d["combinations"][: args.top]
    if args.format == "json":
        text = to_json(d)
    elif args.format == "csv":
        text = render_csv(d)
    else:
        text = render_text(d)
    write_output(text, args.output, force=args.force)
    return 0 if d["summary"]["valid_and_fit"] else 1
