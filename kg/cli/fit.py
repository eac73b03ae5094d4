"""Context fit of techniques to a request trace: measurements, the checklist, the triangle and the patterns.

``optkg fit TRACE [--model M | --config C] [--gpu G | --kv-budget-gib X] [--max-model-len N] [--max-num-seqs N] [--quantization Q]
[--speculative-config JSON] [--engine-version X.Y.Z] [--causal yes|no]
[--session-length N] [--attention-locality local|global] [--format text|json|markdown]
[--plot out.png [--force]] [--verbose]``. TRACE is a Mooncake JSONL trace (prefix-block hashes)
or an Azure LLM inference CSV (token counts only). Exit codes: 0 done (or no finding at or above
--fail-on), 1 a finding at or above --fail-on, 2 bad input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kg.core.errors import OptkgError
from kg.core.textsafe import fit_width
from kg.cli.common import add_catalog_arg, load_clean_catalog, parse_thresholds, write_output

SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}


def _yes_no(v: str) -> bool:
    s = v.strip().lower()
    if s in ("yes", "true", "1", "y"):
        return True
    if s in ("no", "false", "0", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected yes or no, found {v!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="request trace: Mooncake JSONL (hash_ids) or Azure LLM inference CSV")
    p.add_argument("--trace-format", choices=("auto", "mooncake", "azure"), default="auto",
                   help="trace format (default: detect from the first line)")
    p.add_argument("--block-size", type=int, default=512, help="tokens per hash id in a Mooncake trace (default 512)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="model: a bundled hub id (e.g. meta-llama/Llama-3.1-8B) or a config.json path")
    src.add_argument("--config", type=Path, help="a Hugging Face config.json (or a folder holding one)")
    p.add_argument("--tp", type=int, default=1, help="tp_size (default 1)")
    p.add_argument("--pp", type=int, default=1, help="pp_size (default 1)")
    p.add_argument("--dcp", type=int, default=1, help="dcp_size (default 1)")
    p.add_argument("--kv-cache-dtype", default="auto", help="auto (model dtype), fp8, fp8_e4m3, fp8_e5m2, int8")
    p.add_argument("--gpu", help="GPU from the catalog (its memory sets the KV budget): H100-SXM, H200, B200, ...")
    from kg.cli.common import add_gpu_args
    add_gpu_args(p)
    p.add_argument("--kv-budget-gib", type=float, help="KV memory per GPU in GiB (instead of deriving it from --gpu)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="share of GPU memory the engine may use (default: vLLM's, 0.92 in 0.33.0)")
    p.add_argument("--max-model-len", type=int, metavar="TOKENS",
                   help="the engine's context limit (default: the model's max_position_embeddings)")
    p.add_argument("--max-num-seqs", type=int, metavar="N",
                   help="the scheduler's batch limit (default: vLLM's default for --gpu, see rules/fit.yaml)")
    p.add_argument("--quantization", metavar="METHOD",
                   help="vLLM --quantization (fp8, awq, ...): the weights of the budget, as check sizes them")
    p.add_argument("--speculative-config", metavar="JSON",
                   help="vLLM --speculative-config: its draft's weights come off the budget, as in check")
    p.add_argument("--kv-cache-memory-bytes", metavar="BYTES",
                   help="vLLM --kv-cache-memory-bytes (10G, 10g, 10737418240): the KV budget itself, as in check")
    p.add_argument("--num-gpu-blocks-override", type=int, metavar="N",
                   help="vLLM --num-gpu-blocks-override: the KV blocks, as in check")
    p.add_argument("--engine-version", metavar="X.Y.Z",
                   help="the vLLM release (default: the latest known): its defaults and sampler decide the budget")
    p.add_argument("--causal", type=_yes_no, metavar="yes|no",
                   help="strict causal dependency (default: from the model's architectures, else unknown)")
    p.add_argument("--session-length", type=float, metavar="TURNS", help="average turns per session (conversation)")
    p.add_argument("--attention-locality", choices=("local", "global"),
                   help="whether the task tolerates local (sliding-window) attention")
    p.add_argument("--threshold", action="append", default=[], metavar="NAME=NUMBER",
                   help="override a fit threshold from rules/fit.yaml (repeatable)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", type=Path, help="write the report to this file (atomic; see --force)")
    p.add_argument("--plot", type=Path, metavar="OUT.png", help="draw the hit-ratio and memory cost curves (matplotlib)")
    p.add_argument("--force", action="store_true", help="overwrite --plot / --output files that exist")
    p.add_argument("--fail-on", choices=("none", "info", "warning", "error"), default="none",
                   help="exit 1 when a finding has at least this severity (default none)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print definitions, thresholds with provenance, rules that did not fire, timing; "
                        "on a bad line, the measurements of the lines before it")
    add_catalog_arg(p)


def check_outputs(output: Path | None, plot: Path | None, force: bool) -> None:
    """Refuse bad output paths before anything is measured or written (OptkgError naming the flag).

    For ``-o`` (unless '-', stdout) and ``--plot``: the folder must exist, the file must not exist
    unless ``force``, and it must not be a folder; ``--plot`` must end in .png; ``-o`` and ``--plot``
    must not name the same file (one would overwrite the other).
    """
    outs = [(flag, p) for flag, p in (("-o", output), ("--plot", plot)) if p is not None and str(p) != "-"]
    if plot is not None and plot.suffix.lower() != ".png":
        raise OptkgError(f"--plot: expected a .png file name, found {plot}")
    for flag, p in outs:
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise OptkgError(f"{p}: folder {parent} does not exist")
        if p.is_dir():
            raise OptkgError(f"{flag} {p}: is a folder, expected a file name")
        if p.exists() and not force:
            raise OptkgError(f"{p}: exists; refusing to overwrite (pass --force to replace it)")
    if len(outs) == 2 and outs[0][1].resolve() == outs[1][1].resolve():
        raise OptkgError(f"-o and --plot name the same file ({output}); give them different names")


def run(args: argparse.Namespace) -> int:
    from kg.analyses.fit import analyse_trace
    from kg.analyses.fitmeasure import PartialTraceError
    from kg.output.fitreport import plot_fit, render_fit_markdown, render_fit_text, render_partial_text
    from kg.inputs.modelcfg import load_config_file, resolve_model
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset

    for flag, v in (("--tp", args.tp), ("--pp", args.pp), ("--dcp", args.dcp), ("--block-size", args.block_size)):
        if v < 1:
            raise OptkgError(f"{flag}: expected a positive integer, found {v}")
    if args.session_length is not None and args.session_length < 1:
        raise OptkgError(f"--session-length: expected a number of turns >= 1, found {args.session_length:g}")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise OptkgError(f"--gpu-memory-utilization: expected a value in (0, 1], found {args.gpu_memory_utilization:g}")
    check_outputs(args.output, args.plot, args.force)
    thresholds = parse_thresholds(args.threshold)
    catalog = load_clean_catalog(args)
    ruleset = load_ruleset("fit", args.rules)
    model = None
    if args.config is not None:
        model = load_config_file(args.config)
    elif args.model:
        model = resolve_model(args.model)
    from kg.cli.common import resolve_gpu_arg
    hardware = resolve_gpu_arg(args, catalog)
    if (hardware is not None or args.kv_budget_gib is not None) and model is None:
        raise OptkgError("--gpu/--kv-budget-gib need --model or --config (the KV budget and cost curve depend on the model)")
    try:
        report, firings, m = analyse_trace(
            args.trace, trace_format=args.trace_format, block_size=args.block_size, model=model, tp=args.tp, pp=args.pp,
            dcp=args.dcp, kv_cache_dtype=args.kv_cache_dtype, hardware=hardware, kv_budget_gib=args.kv_budget_gib,
            gpu_memory_utilization=args.gpu_memory_utilization, causal=args.causal, session_length=args.session_length,
            attention_locality=args.attention_locality, catalog=catalog, ruleset=ruleset, thresholds=thresholds,
            max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
            engine_args={"quantization": args.quantization, "speculative_config": args.speculative_config,
                         "engine_version": args.engine_version, "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
                         "num_gpu_blocks_override": args.num_gpu_blocks_override})
    except PartialTraceError as e:
        if args.verbose and e.partial is not None:
            sys.stdout.write(render_partial_text(e.partial.summary))
            sys.stdout.flush()
        raise
    from kg.inputs.effective import newer_release_note
    release_note = newer_release_note("vllm", args.engine_version)  # fit models vLLM's scheduler
    if release_note:
        report.setdefault("notes", []).append(release_note)
        if args.format != "text" or (args.output is not None and str(args.output) != "-"):  # stdout text has it
            from kg.core.textsafe import say
            say(f"optkg fit: note: {release_note}")
    if args.format == "json":
        text = to_json(report)
    elif args.format == "markdown":
        text = render_fit_markdown(report)
    else:
        if args.verbose:
            report["measurements"]["elapsed_s"] = m.summary.get("elapsed_s")
        text = fit_width(render_fit_text(report, verbose=args.verbose))  # people read it: 100 columns
    if args.plot is not None:
        plot_fit(report, args.plot, force=args.force)
    write_output(text, args.output, force=args.force)
    if args.verbose and args.format != "text":
        sys.stderr.write(f"optkg fit: measured {m.summary['requests']:,} requests in {m.summary['elapsed_s']:.2f} s\n")
    if args.plot is not None:
        sys.stderr.write(f"optkg fit: wrote {args.plot}\n")
    if args.fail_on != "none":
        worst = max((SEVERITY_RANK.get(f.severity or "", 0) for f in firings if f.fired), default=0)
        if worst >= SEVERITY_RANK[args.fail_on]:
            return 1
    return 0
