"""optkg: a knowledge graph and rule engine for ML-systems optimisation — the public Python API.

    import kg
    catalog = kg.load_catalog()
    stack = kg.stack_from_command("vllm serve Qwen/Qwen3-235B-A22B -tp 8", catalog)
    report = kg.check(stack, catalog)
    for f in report.findings:
        print(f.rule_id, f.severity, f.numbers)

Data flows one way (docs/architecture.md): catalog files -> validated catalog (kg.knowledge) ->
stack, metrics, traces (kg.inputs) -> derived quantities (kg.derive) -> rule engine (kg.engine) ->
findings and verdicts (kg.analyses) -> renderers (kg.output); the CLI (kg.cli) is a thin layer over
these functions. ``import kg`` stays cheap: every function imports what it needs when called.

Errors: bad input raises ``kg.OptkgError`` (a one-line message naming the file, flag or field).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from kg.core.errors import OptkgError
from kg.core.version import __version__

if TYPE_CHECKING:  # names for the annotations only; nothing heavy is imported at `import kg`
    from kg.analyses.check import Report
    from kg.analyses.training import TrainingReport
    from kg.engine.rules import RuleSet
    from kg.inputs.modelcfg import ModelFacts
    from kg.inputs.stack import Stack
    from kg.inputs.training.job import TrainingJob
    from kg.knowledge.catalog import Catalog

__all__ = ["OptkgError", "__version__", "load_catalog", "load_rules", "stack_from_command", "stack_from_file",
           "stacks_from_file",
           "check", "kv", "diagnose", "fit"]


def load_catalog(root: Path | str | None = None, *, skip_drafts: bool = False) -> "Catalog":
    """The validated technique catalog: ``root`` (a folder with axes.yaml, techniques/, ...) or,
    when None, the shipped one (``$OPTKG_HOME/catalog`` if set).

    Returns a ``kg.knowledge.catalog.Catalog`` (``.techniques``: id -> entry dict as in the YAML,
    ``.properties``, ``.hardware``, ``.axes``). Raises OptkgError listing the first problems when the
    catalog is invalid (``optkg validate`` reports them all). Served from the on-disk cache when the
    files are unchanged. ``skip_drafts``: leave out technique files still holding ``optkg new``'s TODO
    placeholders instead of refusing the catalog; their paths are in ``catalog.drafts``.
    """
    from kg.knowledge.catalog import load_catalog as _load
    cat, problems = _load(Path(root) if root is not None else None, skip_drafts=skip_drafts)
    if problems:
        n = len(problems)
        more = f"; and {n - 1} more" if n > 1 else ""
        raise OptkgError(f"the catalog has {n} problem(s): {problems[0].one_line()}{more} (`optkg validate` lists "
                         "every one)", [p.one_line() for p in problems])
    return cat


def load_rules(kind: str = "check", rules_dir: Path | str | None = None) -> "RuleSet":
    """The ruleset of ``kind`` (check, diagnose, fit, gaps) from ``rules_dir`` (default: the shipped
    rules/). Raises OptkgError (one line per problem) when a rule file is invalid."""
    from kg.engine.rules import load_ruleset
    return load_ruleset(kind, Path(rules_dir) if rules_dir is not None else None)


def _catalog(catalog: "Catalog | None") -> "Catalog":
    return catalog if catalog is not None else load_catalog()


def _rules(kind: str, rules: "RuleSet | Path | str | None") -> "RuleSet":
    if rules is None or isinstance(rules, (str, Path)):
        return load_rules(kind, rules)
    if getattr(rules, "kind", kind) != kind:
        raise OptkgError(f"rules: expected a '{kind}' ruleset, got '{rules.kind}'")
    return rules


def stack_from_command(command: str, catalog: "Catalog | None" = None, *, engine: str | None = None,
                       config: Path | str | None = None, engine_version: str | None = None) -> "Stack | TrainingJob":
    """What ``optkg check --cmd`` reads from a pasted launch command: a ``kg.inputs.stack.Stack`` for a
    serving launch, a ``kg.inputs.training.job.TrainingJob`` for a training launch.

    Every launch format of the ``--cmd`` registry (kg.inputs.launch.registry) is read: ``vllm serve`` /
    the OpenAI api_server module, SGLang (``python -m sglang.launch_server``, ``sglang serve``),
    ``trtllm-serve``, ``lmdeploy serve api_server``, ``docker run`` / ``podman run`` of an engine image,
    and the training launchers (``torchrun``, ``deepspeed``, ``accelerate launch``, ``python -m
    torch.distributed.run``, verl, torchtitan, ``python pretrain_*.py`` ...). ``kg.check`` takes either.
    ``engine``: 'vllm' or 'sglang' reads ``command`` with that engine's parser (a bare list of its flags
    works too), as ``--vllm``/``--sglang`` do. ``config``: a Hugging Face config.json that replaces the
    command's model. ``engine_version``: the release (serving engine, or training framework) the rules
    scope to. ``stack.values()`` is the flat namespace rules read (``tp_size`` ..., units in the names);
    flags optkg does not model are kept in ``.ignored``. Raises OptkgError naming the flag for a bad
    value, or the known programs when the command launches none of them.
    """
    cat = _catalog(catalog)
    override = str(config) if config is not None else None
    if engine:
        from kg.engines.launch import parse_command
        st = parse_command(command, cat, engine, override, f"--{engine}")
        if engine_version is not None:
            from kg.inputs.stack import check_engine_version
            st.engine_version = check_engine_version(engine_version, "engine_version", "a release number")
        return st
    from kg.engines.launch import parse_launch
    from kg.inputs.modelcfg import resolve_model
    return parse_launch(command, cat, label="command", model_override=override, resolver=resolve_model,
                        engine_version=engine_version)


def stack_from_file(path: Path | str, catalog: "Catalog | None" = None, *,
                    config: Path | str | None = None) -> "Stack | TrainingJob":
    """What ``optkg check FILE`` reads from ``path``, by content: a stack YAML (model, engine, hardware,
    techniques, settings; see kg.inputs.stack), a Kubernetes manifest / compose file / TensorRT-LLM
    LLM-API YAML with one serving container (a ``Stack``), or a training file - DeepSpeed JSON, accelerate
    YAML, torchtitan TOML, a stack YAML with ``framework:`` (a ``TrainingJob``). A file describing several
    serving containers raises OptkgError: use ``stacks_from_file``. ``config``: a Hugging Face config.json
    that replaces the file's model (as ``optkg check FILE --config``). Raises OptkgError naming file:line
    and field for bad input."""
    cat = _catalog(catalog)
    from kg.inputs.training import is_training_file
    if is_training_file(path):
        from kg.inputs.modelcfg import resolve_model
        from kg.inputs.training import load_training_file
        job = load_training_file(Path(path), cat, resolve_model)
        if config is not None:
            from kg.inputs.modelcfg import load_config_file
            job.model = load_config_file(Path(config))
        return job
    stacks = stacks_from_file(path, cat, config=config)
    if len(stacks) > 1:
        raise OptkgError(f"{path}: the file describes {len(stacks)} serving containers "
                         f"({', '.join(s.name for s in stacks)}); use kg.stacks_from_file")
    return stacks[0]


def stacks_from_file(path: Path | str, catalog: "Catalog | None" = None, *,
                     config: Path | str | None = None) -> "list[Stack]":
    """One ``Stack`` per serving container ``path`` describes (a Kubernetes manifest or compose file may hold
    several; a stack YAML or LLM-API YAML gives one), with notes on the containers it skipped; findings
    carry the file's lines (kg.inputs.launch.files)."""
    from kg.engines.launch import stacks_from_file as _from_file
    stacks, skipped, _ = _from_file(Path(path), _catalog(catalog),
                                    model_override=str(config) if config is not None else None)
    for st in stacks:
        st.notes.extend(skipped)
    return stacks


def check(stack: "Stack | TrainingJob", catalog: "Catalog | None" = None,
          rules: "RuleSet | Path | str | None" = None) -> "Report | TrainingReport":
    """Check ``stack`` against the catalog's couplings and the check rules (what ``optkg check`` does).

    A ``TrainingJob`` (from ``stack_from_command`` on a training launch) is checked as ``optkg check``
    checks it: the ``training`` rules plus the catalog's training couplings on the job's techniques; the
    result is a ``kg.analyses.training.TrainingReport`` (``.findings``, ``.to_dict()``: memory per GPU,
    parallel layout, batch arithmetic, outcomes), and ``rules`` is then a training ruleset.

    Returns a ``kg.analyses.check.Report``: ``.findings`` is a list of ``Finding`` (``rule_id``,
    ``severity`` info|warning|error, ``message``, ``techniques``, ``numbers`` — the rule's numbers with
    units in their names, ``fix``, ``sources``), most severe first; ``.derived`` the derived
    quantities (e.g. KV bytes per token); ``.to_dict()`` the JSON shape of ``optkg check --format json``.
    ``rules``: a RuleSet, a rules folder, or None for the shipped rules.
    """
    import sys
    job = sys.modules.get("kg.inputs.training.job")  # a TrainingJob exists only once its module is loaded
    if job is not None and isinstance(stack, job.TrainingJob):
        from kg.analyses.training import training_report
        return training_report(stack, _rules("training", rules), _catalog(catalog))
    from kg.analyses.check import check_stack
    return check_stack(stack, _catalog(catalog), _rules("check", rules))


def kv(model: "ModelFacts | Stack | str | Path", tp_size: int | None = None, pp_size: int | None = None,
       dcp_size: int | None = None, kv_cache_dtype: str | None = None, *, kv_budget_gib: float | None = None,
       max_model_len: int | None = None, block_size: int | None = None,
       max_num_batched_tokens: int | None = None, engine_version: str | None = None,
       disable_hybrid_kv_cache_manager: bool | None = None) -> dict[str, Any]:
    """The KV-cache layout of a model at a parallel layout (what ``optkg kv --format json`` prints).

    ``model``: a bundled hub id, a config.json (or a folder holding one), a ``ModelFacts`` or a ``Stack``
    (then its model, and its ``tp_size``/``pp_size``/``dcp_size``/``kv_cache_dtype``/``kv_budget_gib``/
    ``max_model_len``/``block_size``/``max_num_batched_tokens`` values are the defaults). Sizes default
    to 1 and the dtype to 'auto' (the model's dtype).
    Returns a dict: ``model``, ``attention`` (mha|gqa|mqa|mla), head counts, ``layout`` (bytes per token
    for the whole model and per GPU, ``kv_heads_per_rank``, ``replication_factor``, ``valid_dcp_sizes``
    ...), ``vllm_plan`` (vLLM V1's per-layer plan: block size in tokens, blocks per request) and, with
    ``kv_budget_gib`` (GiB of KV memory per GPU), ``capacity`` (KV tokens per GPU and in total, GPU
    blocks, the longest request that fits, max concurrency at ``max_model_len`` tokens). ``engine_version`` (the vLLM
    release; a Stack's own by default, else the latest optkg knows) and ``disable_hybrid_kv_cache_manager`` decide
    the hybrid KV-cache manager (Llama-4's chunked layers) and the tokens in flight (kg.engines.vllm.kv_plan). Raises
    OptkgError for sizes the model cannot take (tp_size must divide the attention heads ...).
    Formulas and sources: kg.derive.kv, kg.engines.vllm.kv_plan.
    """
    from kg.analyses.kvreport import kv_report
    from kg.inputs.modelcfg import ModelFacts, resolve_model
    ns: dict[str, Any] = {}
    if hasattr(model, "values") and hasattr(model, "model"):  # a Stack: settings and technique parameters
        ns = model.values()
        engine_version = engine_version or getattr(model, "engine_version", None)
        model = model.model
        if model is None:
            raise OptkgError("kv: the stack names no model")
    if not isinstance(model, ModelFacts):
        model = resolve_model(str(model))

    def pick(given: Any, name: str, default: Any) -> Any:
        return given if given is not None else ns.get(name, default)
    tp, pp, dcp = pick(tp_size, "tp_size", 1), pick(pp_size, "pp_size", 1), pick(dcp_size, "dcp_size", 1)
    block, batched = pick(block_size, "block_size", None), pick(max_num_batched_tokens, "max_num_batched_tokens", None)
    for name, v in (("tp_size", tp), ("pp_size", pp), ("dcp_size", dcp), ("block_size", block),
                    ("max_num_batched_tokens", batched)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise OptkgError(f"kv: {name} must be a positive integer, found {v!r}")
    # the checks every stack input and `optkg kv` run on these values (nan, inf, strings, negatives: OptkgError)
    from kg.core.numparse import MAX_COUNT, as_float
    from kg.inputs.settingcheck import checked_setting
    budget, mml = pick(kv_budget_gib, "kv_budget_gib", None), pick(max_model_len, "max_model_len", None)
    if budget is not None:
        budget = as_float(checked_setting("kv_budget_gib", budget, "kv"), "kv: kv_budget_gib", 0, MAX_COUNT)
    if mml is not None:
        mml = checked_setting("max_model_len", mml, "kv")
    out, _, _ = kv_report(model, tp, pp, dcp, pick(kv_cache_dtype, "kv_cache_dtype", None) or "auto",
                          budget, mml, block, batched, engine_version=None if engine_version is None else str(engine_version),
                          disable_hybrid_kv_cache_manager=pick(disable_hybrid_kv_cache_manager,
                                                               "disable_hybrid_kv_cache_manager", None))
    return out


def diagnose(paths: Iterable[Path | str] = (), *, before: Iterable[Path | str] = (), after: Iterable[Path | str] = (),
             window_s: float | None = None, phase: str = "load", stack: "Stack | None" = None,
             catalog: "Catalog | None" = None, rules: "RuleSet | Path | str | None" = None,
             target_throughput: float | None = None, workload: str | None = None) -> dict[str, Any]:
    """Which wall a deployment is on (memory, compute, bandwidth or neither), from metrics files
    (what ``optkg diagnose --format json`` prints).

    ``paths``: Prometheus scrapes of vLLM/SGLang/dcgm-exporter, nvidia-smi CSV or dmon output, or
    folders of them (format told from the content); ``before``/``after``: two scrapes of the same
    endpoint, with ``window_s`` seconds between them (else from sample timestamps), for window rates.
    ``stack``: the deployment, to link the techniques for each wall to its own (``check`` collisions).
    ``target_throughput``: output tokens/s expected. ``workload``: serving|training|generate.
    Returns the report dict (``verdict``, ``walls``, readings, ``checklist``, ``findings``,
    ``thresholds``, ``notes``). The catalog is loaded only when a wall fires or a stack is given.
    """
    from kg.analyses.diagnose import diagnose as _diagnose
    from kg.inputs.metrics.load import load_snapshot
    paths, before, after = list(paths), list(before), list(after)
    if not paths and not after:
        raise OptkgError("diagnose: no metrics given (pass paths, or before= and after=)")
    rules_dir = rules if isinstance(rules, (str, Path)) else None
    ruleset = _rules("diagnose", rules)
    snap = load_snapshot(paths, before=before, after=after, window_s=window_s, phase=phase)
    cat = catalog if catalog is not None else load_catalog
    check_rules = load_rules("check", rules_dir) if stack is not None else None
    return _diagnose(snap, ruleset, cat, stack, target_throughput, workload, {}, {}, check_rules)


def fit(trace: Path | str, model: "ModelFacts | str | Path | None" = None, *, catalog: "Catalog | None" = None,
        rules: "RuleSet | Path | str | None" = None, gpu: str | None = None, **options: Any) -> dict[str, Any]:
    """How well a request trace fits the techniques that reuse KV cache (what ``optkg fit --format json`` prints).

    ``trace``: a Mooncake JSONL trace (``hash_ids`` of ``block_size``-token blocks) or an Azure LLM
    inference CSV. ``model`` (hub id, config.json or ModelFacts) and ``gpu`` (a catalog GPU name) add
    the KV budget and the memory cost curve. ``options`` are those of
    ``kg.analyses.fit.analyse_trace``: ``trace_format``, ``block_size`` (tokens, default 512), ``tp``,
    ``pp``, ``dcp``, ``kv_cache_dtype``, ``kv_budget_gib`` (GiB per GPU), ``gpu_memory_utilization``
    (fraction, default 0.9), ``causal``, ``session_length`` (turns), ``attention_locality``,
    ``thresholds``, ``max_model_len`` (tokens), ``max_num_seqs``.
    Returns the report dict (measurements, features, verdicts per technique, findings).
    """
    from kg.analyses.fit import analyse_trace
    from kg.inputs.modelcfg import ModelFacts, resolve_model
    cat = _catalog(catalog)
    if model is not None and not isinstance(model, ModelFacts):
        model = resolve_model(str(model))
    hardware = cat.resolve_hardware(gpu) if gpu else None
    report, _, _ = analyse_trace(trace, model=model, hardware=hardware, catalog=cat, ruleset=_rules("fit", rules),
                                 **options)
    return report
