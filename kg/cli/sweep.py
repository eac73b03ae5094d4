"""Evaluate many layouts of one stack (TP, PP, DP, EP, DP attention, DCP, max_num_seqs, quantisation, KV dtype,
GPU type, engine): which start, their KV capacity and, from aiconfigurator-core, their speed; the fastest
layout per GPU that meets --ttft-ms / --itl-ms first, with the Pareto front marked.

Exit codes: 0 when at least one combination is valid and fits, 1 when none does, 2 on bad input.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.textsafe import fit_width
from kg.cli.common import add_catalog_arg, add_stack_args, load_clean_catalog, stack_from_args, write_output

FORMATS = ("text", "json", "csv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_stack_args(p)
    add_catalog_arg(p)
    p.add_argument("--tp", metavar="N,N,...", help="tp_size values, e.g. 1,2,4,8 (default: the stack's)")
    p.add_argument("--pp", metavar="N,N,...", help="pp_size values (default: the stack's)")
    p.add_argument("--dp", metavar="N,N,...", help="dp_size values (data parallel / DP-attention ranks)")
    p.add_argument("--ep", metavar="N,N,...",
                   help="expert-parallel sizes (vLLM: 1 = off, tp x dp = --enable-expert-parallel)")
    p.add_argument("--dp-attention", metavar="on,off", help="DP attention switched on and/or off (SGLang)")
    p.add_argument("--dcp", metavar="N,N,...", help="dcp_size values, e.g. 1,2,4 (default: the stack's)")
    p.add_argument("--max-num-seqs", metavar="N,N,...", help="running-request caps (vLLM --max-num-seqs, "
                   "SGLang --max-running-requests)")
    p.add_argument("--quantization", metavar="Q,Q,...", help="--quantization values, e.g. none,fp8 (none: no --quantization flag; default: the stack's)")
    p.add_argument("--kv-cache-dtype", metavar="D,D,...", help="kv_cache_dtype values, e.g. auto,fp8 (default: the stack's)")
    p.add_argument("--engine", metavar="E,E,...", help="engines to compare, e.g. vllm,sglang (default: the stack's)")
    p.add_argument("--invalid-on", choices=("info", "warning", "error"), default="error",
                   help="a finding at or above this severity marks a combination invalid (default: error)")
    from kg.speed.workload import add_workload_arguments
    add_workload_arguments(p)
    p.add_argument("--ttft-ms", type=float, metavar="MS", help="speed objective: TTFT at most this (ms)")
    p.add_argument("--itl-ms", type=float, metavar="MS", help="speed objective: ITL (TPOT) at most this (ms)")
    p.add_argument("--no-speed", action="store_true", help="rules and KV only: no speed estimate, KV ranking")
    p.add_argument("--executor", choices=("local", "ray", "inline"), default="local",
                   help="where combinations are evaluated: worker processes (default), Ray tasks, or this process")
    p.add_argument("--address", metavar="ADDR", help="--executor ray: the Ray cluster (default: start a local Ray)")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes / Ray CPUs (default: the CPUs available)")
    p.add_argument("--only-valid", action="store_true", help="list only combinations that are valid and fit")
    p.add_argument("--top", type=int, metavar="N", help="list only the N best combinations")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S",
                   help="refuse a sweep estimated (from its first combinations) to take longer than S seconds "
                        "(default 10)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("-o", "--output", type=Path, help="write the table here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting an existing output file")


def _gpu_list(args) -> list[str] | None:
    """--gpu H100,H200,B200 is the GPU axis; a single --gpu is the stack's GPU (as in check)."""
    if args.gpu and "," in args.gpu:
        from kg.analyses.sweep import parse_str_list
        gpus = [g.strip() for g in args.gpu.split(",") if g.strip()]
        parse_str_list(args.gpu, "--gpu")  # empty items are errors
        args.gpu = gpus[0]
        return gpus
    return None


def run(args: argparse.Namespace) -> int:
    import sys
    from kg.core.errors import OptkgError
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset
    from kg.analyses.sweep import parse_int_list, parse_onoff_list, parse_str_list, sweep
    from kg.output.sweep_report import render_csv, render_text

    if args.top is not None and args.top < 1:
        raise OptkgError(f"--top: expected a positive integer, found {args.top}")
    for flag, v in (("--ttft-ms", args.ttft_ms), ("--itl-ms", args.itl_ms)):
        if v is not None and not v > 0:
            raise OptkgError(f"{flag}: expected a positive number of milliseconds, found {v}")
    ints = {"tp_size": ("--tp", args.tp), "pp_size": ("--pp", args.pp), "dp_size": ("--dp", args.dp),
            "ep_size": ("--ep", args.ep), "dcp_size": ("--dcp", args.dcp), "max_num_seqs": ("--max-num-seqs",
                                                                                          args.max_num_seqs)}
    axes = {k: parse_int_list(v, flag) for k, (flag, v) in ints.items() if v is not None}
    if args.dp_attention is not None:
        axes["enable_dp_attention"] = parse_onoff_list(args.dp_attention, "--dp-attention")
    if args.quantization is not None:
        axes["quantization"] = parse_str_list(args.quantization, "--quantization")
    if args.kv_cache_dtype is not None:
        axes["kv_cache_dtype"] = parse_str_list(args.kv_cache_dtype, "--kv-cache-dtype")
    engines = parse_str_list(args.engine, "--engine") if args.engine else None
    gpus = _gpu_list(args)
    from kg.speed.workload import workload_from_args
    workload = None if args.no_speed else workload_from_args(args)
    if args.no_speed and (args.ttft_ms is not None or args.itl_ms is not None):
        raise OptkgError("--ttft-ms/--itl-ms need the speed estimate; drop --no-speed")
    catalog = load_clean_catalog(args)
    rules = load_ruleset("check", args.rules)
    base = stack_from_args(args, catalog)
    from kg.analyses.sweep import MAX_SECONDS
    if args.max_seconds is not None and not 0 < args.max_seconds <= 86_400:
        raise OptkgError(f"--max-seconds: expected seconds in (0, 86400], found {args.max_seconds:g}")
    result = sweep(base, catalog, rules, axes=axes, gpus=gpus, engines=engines, invalid_on=args.invalid_on,
                   max_seconds=args.max_seconds if args.max_seconds is not None else MAX_SECONDS,
                   workload=workload, ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, executor=args.executor,
                   jobs=args.jobs, address=args.address, progress=sys.stderr.isatty(),
                   catalog_dir=str(args.catalog) if args.catalog else None,
                   rules_dir=str(args.rules) if args.rules else None)
    d = result.to_dict()
    from kg.inputs.effective import newer_release_note
    release_note = newer_release_note(base.engine, base.engine_version)
    if release_note and release_note not in d["notes"]:
        d["notes"].append(release_note)
    if args.only_valid:
        d["combinations"] = [c for c in d["combinations"] if c["valid"] and c["fits"]]
    if args.top is not None:
        d["combinations"] = d["combinations"][: args.top]
    if args.format == "json":
        text = to_json(d)
    elif args.format == "csv":
        text = render_csv(d)
    else:
        text = fit_width(render_text(d))  # people read it: 100 columns
    write_output(text, args.output, force=args.force)
    return 0 if d["summary"]["valid_and_fit"] else 1
