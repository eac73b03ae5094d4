"""``optkg check`` for training jobs: a pasted training command (``--train``), or a training file
(DeepSpeed JSON, accelerate YAML, torchtitan TOML, stack YAML with ``framework:``) given as the
stack argument. Prints the training report (kg.output.training_report): layout, batch, memory per
GPU with its breakdown, findings of the ``training`` ruleset."""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.core.errors import OptkgError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--train", metavar="CMD",
                   help="a training launch command, quoted (torchrun ... pretrain_gpt.py ..., deepspeed ..., "
                        "accelerate launch ..., torchtitan --job.config_file ...)")
    p.add_argument("--model", help="model of the training job: bundled hub id or a folder/file with config.json "
                                   "(Megatron's --num-layers/--hidden-size/... override its fields)")
    p.add_argument("--framework-version", help="release of the training framework (Megatron: megatron-core)")
    p.add_argument("--seq-length", type=int, metavar="TOKENS",
                   help="tokens per sequence, for inputs that do not carry one (a DeepSpeed JSON, an accelerate config)")
    p.add_argument("--micro-batch-size", type=int, metavar="N",
                   help="sequences per GPU per forward pass, for inputs that do not carry one")
    p.add_argument("--global-batch-size", type=int, metavar="N",
                   help="sequences per optimizer step across the job, for inputs that do not carry one")


def _command(args: argparse.Namespace) -> str | None:
    """The training command: --train, or a --cmd that launches training (torchrun, deepspeed, accelerate, ...)."""
    if getattr(args, "train", None):
        return args.train
    cmd = getattr(args, "cmd", None)  # the launch registry's --cmd (serving commands stay with it)
    if cmd:
        from kg.inputs.training import is_training_command
        if is_training_command(cmd):
            return cmd
    return None


# top-level fields of a serving stack file (kg.inputs.stack) that no training framework's config file has
# (each framework's claims_file keys on its own: zero_optimization, distributed_type, actor_rollout_ref, ...;
# tests/test_training_detection_shortcut.py holds every registered framework to it)
SERVING_ONLY_FIELDS = frozenset({"name", "model", "config", "engine", "engine_version", "hardware", "techniques",
                                 "settings", "description"})


def serving_stack_file(path: Path) -> bool:
    """True for a YAML file that is plainly a serving stack: a mapping whose every top-level field is a serving
    stack's (``SERVING_ONLY_FIELDS``: no ``framework:``, ``training:``), among them ``engine`` or ``techniques``.
    Read through the content-keyed cache, so a serving ``check`` neither imports the training readers nor asks
    every framework package whether it claims the file. False (the full detection decides) otherwise."""
    if Path(path).suffix not in (".yaml", ".yml"):
        return False
    from kg.core.yamlio import load_yaml
    try:
        data = load_yaml(path, cache=True).data
    except (OptkgError, OSError):
        return False
    return (isinstance(data, dict) and bool({"engine", "techniques"} & set(data))
            and all(isinstance(k, str) and k in SERVING_ONLY_FIELDS for k in data))


def wants_training(args: argparse.Namespace) -> bool:
    if _command(args):
        return True
    st = getattr(args, "stack", None)
    if st is not None and Path(st).exists():
        if serving_stack_file(Path(st)):
            return False
        from kg.inputs.training import is_training_file
        return is_training_file(st)
    return False


def refuse_serving_launch(text: str, label: str = "--train") -> None:
    """OptkgError (one line, exit 2) when ``text`` launches a serving engine or a container, not training:
    the launch registry (kg.inputs.launch) names the program it found."""
    import kg.inputs.launch  # noqa: F401  (registers the launch formats)
    from kg.inputs.launch.argv import tokens
    from kg.inputs.launch.registry import match_program
    try:
        words = tokens(text)
    except OptkgError:
        return  # the training reader reports the quoting error itself
    m = match_program(words)
    if m is not None and m[0].kind != "training":
        lz, a, b = m
        raise OptkgError(f"{label}: '{' '.join(words[a:b])}' launches {lz.name} ({lz.kind}), not a training job; "
                         "give serving launches to --cmd (or --vllm/--sglang)")


def build_job(args: argparse.Namespace, catalog):
    from kg.inputs.modelcfg import load_config_file, resolve_model
    from kg.inputs.training import load_training_file, parse_training_command
    model = None
    if args.config:
        model = load_config_file(args.config)
    elif getattr(args, "model", None):
        model = resolve_model(args.model)
    text = _command(args)
    if text:
        label = "--train" if getattr(args, "train", None) else "--cmd"
        if getattr(args, "stack", None):
            raise OptkgError(f"give one of: a training file or {label}")
        if label == "--train":
            refuse_serving_launch(text)
        job = parse_training_command(text, model=model, where=label, base_dir=Path("."), resolver=resolve_model)
    else:
        job = load_training_file(args.stack, catalog, resolve_model)
        if model is not None:
            job.model = model
    if args.gpu is not None or getattr(args, "gpu_memory_gib", None) is not None:
        from kg.cli.common import resolve_gpu_arg
        job.hardware = resolve_gpu_arg(args, catalog)
    if args.count is not None:
        if args.count < 1:
            raise OptkgError(f"--count: expected a positive integer, found {args.count}")
        par = job.parallel()
        if ("world_size" in job.settings or "gpus_per_node" in job.settings) and par["world_size"] != args.count:
            job.notes.append(f"--count {args.count} replaces the job's own world size {par['world_size']} "
                             "(launcher --nnodes x --nproc_per_node, --num_processes or the config)")
        job.set("world_size", args.count, "--count")
        job.unknown.discard("world_size")
    elif job.node_gpus and not ({"world_size", "gpus_per_node"} & job.settings.keys()):
        node = (job.hardware or {}).get("gpus_per_node")
        if node:
            job.set("gpus_per_node", int(node), "the catalog's node")
            job.notes.append(f"{job.node_gpus}: read as the {job.hardware['id']} node's {int(node)} GPUs "
                             "(catalog); give --count for another count")
        else:
            job.unknown.add("world_size")
            job.notes.append(f"{job.node_gpus}: the GPU count is unknown without --gpu; give --count")
    for opt, name in (("--seq-length", "seq_length"), ("--micro-batch-size", "micro_batch_size"),
                      ("--global-batch-size", "global_batch_size")):
        val = getattr(args, name, None)
        if val is None:
            continue
        if val < 1:
            raise OptkgError(f"{opt}: expected a positive integer, found {val}")
        if name in job.settings and job.settings[name] != val:
            job.notes.append(f"{opt} {val} replaces the job's own {name} {job.settings[name]}")
        job.set(name, val, opt)
    if getattr(args, "framework_version", None):
        from kg.inputs.stack import check_engine_version
        job.framework_version = check_engine_version(args.framework_version, "--framework-version",
                                                     "a framework version number")
        from kg.core.relcmp import Release
        from kg.frameworks.registry import get as framework_of
        known = [r.version for r in framework_of(job.framework).releases]
        try:
            newer = bool(known) and Release(job.framework_version) > max(Release(v) for v in known)
        except ValueError:  # not a release number (packaging's InvalidVersion)
            newer = False
        if newer:
            latest = str(max(Release(v) for v in known))
            job.notes.append(f"{job.framework} {job.framework_version} is newer than the latest release optkg knows "
                             f"({latest}): checked with the knowledge of {latest}")
    if job.model is None and not job.shape().get("num_layers"):
        job.notes.append("no model: give --model/--config or the framework's own shape flags to size memory")
    return job


def run_training(args: argparse.Namespace, catalog) -> int:
    from kg.analyses.training import check_training
    from kg.engine.rules import load_ruleset
    from kg.output.filtering import apply_filters, fail_code
    from kg.output.report import to_json
    from kg.output.training_report import render_training_text
    from kg.cli.common import write_output
    job = build_job(args, catalog)
    rules = load_ruleset("training", args.rules)
    d = check_training(job, rules, catalog)
    d["findings"], d["suppressed"] = apply_filters(d["findings"], args.select, args.ignore, args.baseline,
                                                   rules_dir=args.rules)
    if args.write_baseline:
        from kg.output.filtering import write_baseline
        write_baseline(args.write_baseline, d["findings"], force=args.force)
    if args.diagram:
        raise OptkgError("--diagram draws serving stacks; it is not available for training jobs yet")
    if args.format == "text":
        text = render_training_text(d, explain=args.explain)
    elif args.format == "json":
        if not args.explain:
            d.pop("not_fired", None)
        text = to_json(d)
    elif args.format == "html":
        from kg.output.site.assets import stylesheet
        from kg.output.site.report_training import render_training_html
        text = render_training_html(d, args.site_url, css=stylesheet())
    else:
        from kg.output.formats import render
        text = render(args.format, "check", d)
    write_output(text, args.output, force=args.force)
    if args.format == "html" and args.output is not None and str(args.output) != "-":
        import sys
        sys.stderr.write(f"wrote {args.output} (technique links point into {args.site_url})\n")
    return fail_code(d["findings"], args.fail_on)
