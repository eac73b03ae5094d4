"""``optkg reconcile LOG [LOG ...] [--vllm CMD] [--sglang CMD]``: optkg's memory estimate beside each
number of an engine's startup log (kg.analyses.reconcile)."""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.errors import OptkgError
from kg.core.textsafe import fit_width


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kg.cli.common import add_catalog_arg
    p.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="vLLM (V0 or V1) or SGLang startup log")
    p.add_argument("--vllm", metavar="CMD", help="the `vllm serve ...` command the vLLM log came from")
    p.add_argument("--sglang", metavar="CMD", help="the SGLang launch command the SGLang log came from")
    p.add_argument("--config", type=Path, help="a Hugging Face config.json (overrides the model in the commands)")
    p.add_argument("--gpu", help="GPU name, for optkg's own budget estimate (H100-SXM, H200, ...)")
    from kg.cli.common import add_gpu_args
    add_gpu_args(p)
    p.add_argument("--engine-version", help="engine release the logs came from (engine defaults per release)")
    p.add_argument("--accept-log-mismatch", action="store_true",
                   help="compare even when the log's model, TP size or KV bytes per token say it is not the command's stack")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_catalog_arg(p)


def _stack(cmd: str | None, engine: str, args, catalog):
    if not cmd:
        return None
    from kg.engines.launch import parse_command
    from kg.inputs.stack import check_engine_version
    st = parse_command(cmd, catalog, engine, str(args.config) if args.config else None, f"--{engine}")
    if args.gpu is not None or args.gpu_memory_gib is not None:
        from kg.cli.common import resolve_gpu_arg
        st.hardware = resolve_gpu_arg(args, catalog)
    if args.engine_version is not None:
        st.engine_version = check_engine_version(args.engine_version, "--engine-version")
    return st


def run(args: argparse.Namespace) -> int:
    from kg.analyses.reconcile import SCHEMA_VERSION, compare, reconcile
    from kg.cli.common import load_clean_catalog
    from kg.engines.logs import read_startup_log
    from kg.output.report import to_json
    from kg.output.reconcile_report import render_text
    catalog = load_clean_catalog(args)
    stacks = {"vllm": _stack(args.vllm, "vllm", args, catalog), "sglang": _stack(args.sglang, "sglang", args, catalog)}
    recs = []
    from kg.analyses.reconcile import log_stack_mismatch
    for path in args.logs:
        log = read_startup_log(path)
        stack = stacks.get(log.engine)
        if stack is not None:
            why = log_stack_mismatch(log, stack)
            if why and not args.accept_log_mismatch:
                raise OptkgError(f"{path}: the log is not of the --{log.engine} command's stack ({stack.name}): "
                                 + "; ".join(why) + " (--accept-log-mismatch compares anyway)")
        rec = reconcile(log, stack)
        other = [e for e, st in stacks.items() if st is not None and e != log.engine]
        if stack is None and other:
            rec.notes = [n for n in rec.notes if not n.startswith("no --vllm/--sglang command")]
            rec.notes.append(f"this is a {log.engine} log and only a --{other[0]} command was given (it is compared "
                             f"with {other[0]} logs): pass --{log.engine} CMD for optkg's estimate; only the logged "
                             "numbers are shown")
        recs.append(rec)
    if not recs:
        raise OptkgError("no log given")
    comparison = []
    if len(recs) == 2:
        comparison = compare(recs[0], recs[1])
    d = {"schema_version": SCHEMA_VERSION, "kind": "reconcile", "logs": [r.to_dict() for r in recs],
         "comparison": comparison}
    print(to_json(d) if args.format == "json" else fit_width(render_text(d)), end="")
    return 0
