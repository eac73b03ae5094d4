"""Which wall am I on -- memory, compute, bandwidth or neither -- from serving and GPU metrics.

Inputs are files or directories, format auto-detected: vLLM / SGLang / dcgm-exporter /
nvidia_gpu_exporter Prometheus text (GET /metrics), `nvidia-smi --query-gpu=... --format=csv`,
`nvidia-smi dmon`, nvidia_gpu_exporter captures, dcgm-exporter field lists. Several files merge into
one snapshot; two scrapes of one endpoint (--before/--after, or two files of one engine) give
counter rates over the window.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.textsafe import fit_width
from kg.cli.common import add_catalog_arg, add_stack_args, write_output

FORMATS = ("text", "json", "markdown")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=Path, metavar="FILE_OR_DIR",
                   help="metrics files or directories (merged into one snapshot)")
    p.add_argument("--before", type=Path, action="append", default=[], metavar="FILE_OR_DIR",
                   help="an earlier scrape of the same endpoint(s); counters become window increases")
    p.add_argument("--after", type=Path, action="append", default=[], metavar="FILE_OR_DIR",
                   help="the later scrape (same as a positional input)")
    p.add_argument("--window", type=float, metavar="SECONDS",
                   help="seconds between the two scrapes (else from sample timestamps); turns increases into rates")
    p.add_argument("--capture-phase", choices=("load", "idle"), default="load",
                   help="which phase of an nvidia_gpu_exporter capture to read (default: load)")
    p.add_argument("--thresholds", type=Path, metavar="YAML",
                   help="override thresholds: {name: value} (names: see the report or rules/walls.yaml)")
    p.add_argument("--stack", type=Path, metavar="YAML", help="your stack file (context, and which techniques collide)")
    add_stack_args(p, positional=False)
    p.add_argument("--workload", choices=("serving", "training", "generate"),
                   help="what ran (default: serving when engine metrics or an engine stack are given)")
    p.add_argument("--target-throughput", type=float, metavar="TOKENS_PER_S",
                   help="the output tokens/s you expect; a compute wall needs throughput below it")
    p.add_argument("--max-input-mib", type=float, default=None, metavar="MIB",
                   help="read metrics inputs of up to this many MiB together (default 8: about 3 s of parsing)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--fail-on", choices=("low", "moderate", "severe", "critical", "never"), default="severe",
                   help="exit 1 when a wall at or above this severity is found (default: severe)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also list unknown metric names, threshold provenance and rules that did not fire")
    add_catalog_arg(p)
    p.add_argument("-o", "--output", type=Path, help="write the report here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting an existing output file")
    _allow_intermixed(p)


def _allow_intermixed(p: argparse.ArgumentParser) -> None:
    """Let input files appear between options (``a.prom --window 60 b.csv``), as argparse's intermixed parsing does.

    The parent parser calls ``parse_known_args`` on this subparser; route that call through
    ``parse_known_intermixed_args``, which itself needs the plain method while it runs.
    """
    plain = type(p).parse_known_args

    def parse_known_args(args=None, namespace=None):
        p.parse_known_args = lambda a=None, n=None: plain(p, a, n)  # type: ignore[method-assign]
        try:
            return type(p).parse_known_intermixed_args(p, args, namespace)
        finally:
            p.parse_known_args = parse_known_args  # type: ignore[method-assign]

    p.parse_known_args = parse_known_args  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> int:
    from kg.analyses.diagnose import diagnose, fail_code, load_thresholds
    from kg.output.diagnose_report import render_markdown, render_text
    from kg.core.errors import OptkgError
    from kg.inputs.metrics.load import load_snapshot
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset

    if not args.paths and not args.after:
        raise OptkgError("no metrics given: pass files or directories (or --before A --after B)")
    ruleset = load_ruleset("diagnose", args.rules)
    overrides, where = (load_thresholds(args.thresholds, ruleset) if args.thresholds else ({}, {}))
    from kg.inputs.metrics.load import MAX_FILE_BYTES
    cap = MAX_FILE_BYTES
    if args.max_input_mib is not None:
        if not 0 < args.max_input_mib <= 64 * 1024:
            raise OptkgError(f"--max-input-mib: expected a number of MiB in (0, 65536], found {args.max_input_mib:g}")
        cap = int(args.max_input_mib * 2**20)
    snap = load_snapshot(args.paths, before=args.before, after=args.after, window_s=args.window,
                         phase=args.capture_phase, max_bytes=cap)
    if snap.sources and all(x.format == "dcgm-fields" for x in snap.sources):
        # a dcgm-exporter field list says what the exporter would collect, not what a GPU did: alone it gives
        # no reading to diagnose (an INCONCLUSIVE verdict with exit 0 read as a check that ran)
        off = sorted((f for f, on in (snap.collector_fields or {}).items() if on is False and "_PROF_" in f),
                     key=lambda f: (f != "DCGM_FI_PROF_SM_ACTIVE", f))  # SM_ACTIVE first: the compute wall reads it
        raise OptkgError(f"{snap.sources[0].path}: a dcgm-exporter field list holds no readings; pass a scrape of the "
                         "exporter (GET /metrics) with it" + (f" ({len(off)} profiling field(s) are commented out, "
                                                              f"e.g. {off[0]})" if off else ""))
    problems: list = []

    def catalog():  # loaded only when a wall fires (its techniques are linked) or a stack is given
        if not hasattr(catalog, "value"):
            from kg.knowledge.catalog import load_catalog
            catalog.value, found = load_catalog(args.catalog)
            problems.extend(found)
        return catalog.value

    stack = check_rules = None
    unbundled: list[str] = []
    if any(getattr(args, k, None) for k in ("stack", "vllm", "sglang", "config")):
        stack, unbundled = _stack(args, catalog())
        check_rules = None if unbundled else load_ruleset("check", args.rules)
    d = diagnose(snap, ruleset, catalog, stack, args.target_throughput, args.workload, overrides, where, check_rules)
    for name in unbundled:
        d["notes"].append(f"model '{name}' is not bundled (pass --config path/to/config.json for it): the stack's "
                          "TP size, max model length and KV dtype are used, but no `optkg check` links are made")
    if problems:
        d["notes"].append(f"the catalog has {len(problems)} problem(s) (run `optkg validate`); technique links use the "
                          "entries that loaded")
    if args.format == "json":
        text = to_json(d)
    elif args.format == "markdown":
        text = render_markdown(d, args.verbose)
    else:
        text = fit_width(render_text(d, args.verbose))  # people read it: 100 columns
    write_output(text, args.output, force=args.force)
    return fail_code(d, args.fail_on)


class _UnbundledModel:
    """Stands in for a model diagnose cannot resolve: only its name is known (diagnose reads the stack's
    TP size, max model length and KV dtype, not the model's shape)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _stack(args: argparse.Namespace, catalog):
    """The stack of --stack/--vllm/--sglang/--config; a model that is neither bundled nor a local config
    does not stop diagnose. Returns (stack, names of unresolved models)."""
    from kg.core.errors import OptkgError
    from kg.inputs.modelcfg import resolve_model
    from kg.cli.common import stack_from_args
    unbundled: list[str] = []

    def lenient(name: str):
        try:
            return resolve_model(name)
        except OptkgError as e:
            if not str(e).startswith("unknown model"):
                raise
            unbundled.append(name)
            return _UnbundledModel(name)
    st = stack_from_args(args, catalog, resolver=lenient)
    if isinstance(st.model, _UnbundledModel):
        st.model, st.unresolved_model = None, st.model.name  # read by diagnose's served-model check
    return st, unbundled
