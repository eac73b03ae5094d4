"""Check a stack for coupling findings: which techniques collide, why, what it costs, what fixes it."""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.errors import OptkgError
from kg.cli.common import add_catalog_arg, add_stack_args, load_clean_catalog, stacks_from_args, write_output

FORMATS = ("text", "json", "sarif", "markdown", "github", "html")
SEVERITIES = ("info", "warning", "error", "never")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_stack_args(p)
    add_catalog_arg(p)
    p.add_argument("--kv-budget-from", type=__import__("pathlib").Path, metavar="LOG",
                   help="use the KV-cache memory a vLLM/SGLang startup log reports as the KV budget per GPU (refused when "
                        "the log is of another model, TP size or KV layout, unless --accept-log-mismatch)")
    p.add_argument("--accept-log-mismatch", action="store_true",
                   help="--kv-budget-from: take the log's budget even when its model, TP size or bytes per token "
                        "differ from the stack's")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit 1 when a finding is at or above this severity (default: error)")
    p.add_argument("--select", action="append", default=[], metavar="RULE|TAG|SEVERITY",
                   help="keep only findings whose rule id, tag or severity matches (repeatable, comma-separated)")
    p.add_argument("--ignore", action="append", default=[], metavar="RULE|TAG|SEVERITY",
                   help="drop findings whose rule id, tag or severity matches (repeatable, comma-separated)")
    p.add_argument("--baseline", type=__import__("pathlib").Path, help="JSON file of accepted findings to hide")
    p.add_argument("--write-baseline", type=__import__("pathlib").Path, help="write the current findings as a baseline")
    p.add_argument("--fail-on-unknown", action="store_true",
                   help="exit 1 when a rule that applies to the stack could not be evaluated (missing facts)")
    p.add_argument("--explain", action="store_true", help="also list rules that did not fire, and why")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list every engine default applied (the text report shows those a finding or the KV budget reads)")
    p.add_argument("--diagram", type=__import__("pathlib").Path, help="draw the stack diagram (svg/png/pdf/dot)")
    p.add_argument("-o", "--output", type=__import__("pathlib").Path, help="write the report here instead of stdout")
    p.add_argument("--site-url", default=None, metavar="URL",
                   help="--format html: where the report's technique links point (default site/, the folder "
                        "`optkg export site -o site` writes beside the report; or ../exports/site/, an http(s) URL)")
    p.add_argument("--force", action="store_true", help="allow overwriting existing output files")
    from kg.cli.check_training import add_arguments as add_training_arguments
    add_training_arguments(p)
    from kg.speed.workload import add_workload_arguments
    add_workload_arguments(p)
    p.add_argument("--no-speed", action="store_true",
                   help="leave out the Speed section (TTFT / ITL / tokens/s from aiconfigurator-core)")


def run(args: argparse.Namespace) -> int:
    import kg
    from kg.output.filtering import apply_filters, fail_code
    from kg.output.report import render_check_text, to_json

    from kg.output.filtering import check_terms
    from kg.cli.common import check_output_paths
    check_output_paths([("--write-baseline", args.write_baseline), ("--diagram", args.diagram), ("-o", args.output)],
                       args.force)  # before anything is written: a refused -o leaves no half of the outputs behind
    check_terms(args.select, args.ignore, rules_dir=args.rules)  # a misspelt --select must not hide everything
    if args.site_url is not None and args.format != "html":
        raise OptkgError("--site-url goes with --format html")
    if args.format == "html":
        from kg.output.site.report import DEFAULT_SITE_URL, check_site_url
        args.site_url = check_site_url(args.site_url if args.site_url is not None else DEFAULT_SITE_URL)
    catalog = load_clean_catalog(args)
    from kg.cli.check_training import run_training, wants_training
    if wants_training(args):
        return run_training(args, catalog)
    st = getattr(args, "stack", None)
    if st and Path(st).is_file() and (getattr(args, "framework_version", None) or getattr(args, "model", None)
                                      or getattr(args, "seq_length", None) or getattr(args, "micro_batch_size", None)
                                      or getattr(args, "global_batch_size", None)):
        # a file no reader took (not UTF-8, too deeply nested, ...): its own error first, not "a serving stack"
        from kg.core.yamlio import load_yaml
        load_yaml(Path(st))
    if getattr(args, "framework_version", None):  # a training flag on a serving stack would be silently ignored
        raise OptkgError("--framework-version is the training framework's release (--train or a training stack); "
                         "for a serving engine give --engine-version")
    if getattr(args, "model", None) is not None:  # the training job's model: a serving stack would ignore it
        raise OptkgError("--model is the training job's model (--train or a training file); a serving stack names "
                         "its model in `model:`, in the launch command, or with --config")
    given = [f for f, d in (("--seq-length", "seq_length"), ("--micro-batch-size", "micro_batch_size"),
                            ("--global-batch-size", "global_batch_size")) if getattr(args, d, None) is not None]
    if given:
        raise OptkgError(f"{', '.join(given)}: training-job flag(s) (--train or a training file); a serving check "
                         "takes the request lengths with --isl/--osl or --request-len")
    rules = kg.load_rules("check", args.rules)
    from kg.speed.workload import workload_from_args
    workload = None if args.no_speed else workload_from_args(args)
    stacks = stacks_from_args(args, catalog)
    if len(stacks) > 1 and (args.write_baseline or args.diagram):
        raise OptkgError(f"{args.stack}: --write-baseline/--diagram take one stack; the file describes {len(stacks)}")
    if args.kv_budget_from is not None:
        if args.kv_budget_gib is not None:
            raise OptkgError("give one of --kv-budget-gib and --kv-budget-from")
        from kg.analyses.reconcile import logged_kv_budget
        from kg.engines.logs import read_startup_log
        from kg.inputs.stack import set_setting
        log = read_startup_log(args.kv_budget_from)
        for stack in stacks:
            if stack.engine and log.engine != stack.engine:
                # the two engines size their pools differently (SGLang: K + V of a token pool inside
                # mem_fraction_static; vLLM: blocks after profiling): one's budget does not carry over
                raise OptkgError(f"{args.kv_budget_from}: --kv-budget-from: a {log.engine} startup log for a "
                                 f"{stack.engine} stack ({stack.name}); give a log of the same engine")
        from kg.analyses.reconcile import log_stack_mismatch
        for stack in stacks:
            why = log_stack_mismatch(log, stack)
            if why and not args.accept_log_mismatch:
                raise OptkgError(f"{args.kv_budget_from}: --kv-budget-from: the log is not of this stack ({stack.name}): "
                                 + "; ".join(why) + " (--accept-log-mismatch takes it anyway)")
            if why:
                stack.notes.append("--kv-budget-from log of another stack, taken (--accept-log-mismatch): " + "; ".join(why))
        budget, where = logged_kv_budget(log)
        for stack in stacks:
            set_setting(stack, "kv_budget_gib", budget / 2**30, "--kv-budget-from")
            blocks = log.values.get("num_gpu_blocks")
            if log.generation == "v0" and blocks is not None:  # V0 logs whole blocks (kg.engines.vllm.v0)
                set_setting(stack, "kv_num_blocks", int(blocks.value), "--kv-budget-from")
                if stack.engine_version_assumed or not stack.engine_version:
                    stack.notes.append(f"the log is from vLLM's V0 engine ({int(blocks.value):,} GPU blocks, "
                                       f"{log.path}:{blocks.line}) but no --engine-version was given, so the stack is "
                                       "sized as the newest (V1) release; pass the log's release (e.g. "
                                       "--engine-version 0.6.4) to size it as V0 does")
            stack.notes.append(f"KV budget per GPU from {where}")
            tokens = log.values.get("kv_cache_tokens")
            if tokens is not None:  # the engine's own count, beside optkg's from the logged memory (the table)
                stack.notes.append(f"the log's GPU KV cache size: {int(tokens.value):,} tokens ({log.path}:{tokens.line}); "
                                   "the KV tokens in the table are optkg's from the logged KV memory")
    from kg.inputs.launch.registry import finding_location
    texts, dicts = [], []
    for stack in stacks:
        report = kg.check(stack, catalog, rules)
        d = report.to_dict(explain=args.explain)
        from kg.analyses.givers import annotate
        annotate(d, catalog)  # how to give each fact a rule could not be evaluated without
        if workload is not None and stack.model is not None:
            from kg.speed.serving import speed_for_stack
            d["speed"] = speed_for_stack(stack, d, workload)
        d["findings"], d["suppressed"] = apply_filters(d["findings"], args.select, args.ignore, args.baseline,
                                                       rules_dir=args.rules)
        for f in d["findings"]:
            loc = finding_location(f, stack.origins)
            if loc:
                f["location"] = loc
        dicts.append(d)
    d = dicts[0]
    if args.write_baseline:
        from kg.output.filtering import write_baseline
        write_baseline(args.write_baseline, d["findings"], force=args.force)
    if args.diagram:
        from kg.output.diagrams.stack import stack_diagram
        stack_diagram(d, catalog, args.diagram, force=args.force)
    if args.format == "html":
        from kg.output.diagrams.stack import stack_diagram_build
        from kg.output.site.assets import stylesheet
        from kg.output.site.report import render_check_html
        svgs = [stack_diagram_build(x, catalog).render("svg").decode("utf-8") for x in dicts]
        texts.append(render_check_html(dicts, svgs, args.site_url, css=stylesheet()))
    for d in ([] if args.format == "html" else dicts):
        if args.format == "text":
            texts.append(render_check_text(d, explain=args.explain, verbose=args.verbose))
        elif args.format == "json":
            texts.append(to_json(d))
        else:
            from kg.output.formats import render
            texts.append(render(args.format, "check", d))
    if len(dicts) == 1:
        text = texts[0]
    elif args.format == "json":
        import json
        text = to_json({"schema_version": dicts[0]["schema_version"], "kind": "check-set", "source": str(args.stack),
                        "reports": [json.loads(t) for t in texts]})
    elif args.format == "sarif":
        import json
        docs = [json.loads(t) for t in texts]
        for extra in docs[1:]:
            docs[0]["runs"][0]["results"] += extra["runs"][0]["results"]
            seen = {r["id"] for r in docs[0]["runs"][0]["tool"]["driver"].get("rules", [])}
            docs[0]["runs"][0]["tool"]["driver"].setdefault("rules", []).extend(
                r for r in extra["runs"][0]["tool"]["driver"].get("rules", []) if r["id"] not in seen)
        text = json.dumps(docs[0], indent=2) + "\n"
    else:
        text = "".join(texts) if args.format == "github" else "\n".join(texts)
    write_output(text, args.output, force=args.force)
    if args.format == "html" and args.output is not None and str(args.output) != "-":
        import sys
        sys.stderr.write(f"wrote {args.output} (technique links point into {args.site_url})\n")
    findings = [f for d in dicts for f in d["findings"]]
    code = fail_code(findings, args.fail_on)
    if args.fail_on_unknown and any(d.get("not_evaluable") for d in dicts):
        code = max(code, 1)
    return code
