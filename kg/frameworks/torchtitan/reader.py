"""torchtitan job TOML (``--job.config_file llama3_70b.toml``), read with ``tomllib``.

Sections and keys (torchtitan 0.3.0 ``torchtitan/config/job_config.py``): ``[model] name, flavor,
converters`` (``"float8"`` turns on Float8 training), ``[parallelism] data_parallel_shard_degree``
(-1: the rest of the world), ``data_parallel_replicate_degree``, ``tensor_parallel_degree``,
``pipeline_parallel_degree``, ``context_parallel_degree``, ``expert_parallel_degree``,
``[training] local_batch_size`` (older: ``batch_size``), ``global_batch_size``, ``seq_len``,
``[activation_checkpoint] mode`` (none, selective, full), ``[float8]``, ``[optimizer] name``.
torchtitan shards parameters with FSDP2 (``fully_shard``) over the data-parallel shard group.
The model comes from the flavor: llama3 8B / 70B / 405B map onto the bundled Llama 3.1 configs.
"""
from __future__ import annotations

import math

import re
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import read_text
from kg.inputs.training.job import TrainingJob

FLAVORS = {("llama3", "8B"): "meta-llama/Llama-3.1-8B", ("llama3", "70B"): "meta-llama/Llama-3.1-70B",
           ("llama3", "405B"): "meta-llama/Llama-3.1-405B"}


_HEADER = re.compile(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^((?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=")


def _dotted(raw: str) -> str:
    return ".".join(p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", raw))


def toml_line(text: str, dotted: str) -> int | None:
    """1-based line of the key ``dotted`` (``parallelism.tensor_parallel_degree``) or of the table header
    ``dotted`` in TOML ``text``; None when not found. tomllib keeps no positions, so this scans the text:
    table headers set the current table, ``key =`` lines (bare, quoted or dotted keys) are matched under it.
    Multi-line strings are not tracked (a ``key =`` line inside one could match; only error messages use it)."""
    cur = ""
    for n, line in enumerate(text.splitlines(), 1):
        st = line.strip()
        m = _HEADER.match(st)
        if m:
            cur = _dotted(m.group(1))
            if cur == dotted:
                return n
            continue
        m = _KEY.match(st)
        if m and (f"{cur}.{_dotted(m.group(1))}" if cur else _dotted(m.group(1))) == dotted:
            return n
    return None


def parse_torchtitan_toml(text: str, name: str = "<toml>", resolver=None, world_size: int | None = None) -> TrainingJob:
    """A TrainingJob from torchtitan TOML text. Raises OptkgError naming the file and key."""
    from kg.core.tomlio import loads_toml
    d = loads_toml(text, name)  # bounded: digits, nesting (kg.core.tomlio)
    return job_from_sections(d, text, name, resolver, world_size)


def job_from_sections(d: dict[str, Any], text: str, name: str, resolver=None, world_size: int | None = None,
                      cli: dict[str, str] | None = None) -> TrainingJob:
    """A TrainingJob from torchtitan's config sections (a TOML's tables, or a 0.3.0 registry config with the
    command's overrides); ``text`` is the TOML for line numbers ("" when there is none)."""
    job = TrainingJob(framework="torchtitan", source=name, name=Path(name).name)
    job.configs["torchtitan"] = d  # sections as parsed, for the checks generated from torchtitan's config classes
    if world_size:
        job.configs["torchtitan_world_size"] = world_size  # from the launcher, never derived from the degrees
    model = d.get("model") or {}
    par = d.get("parallelism") or {}
    tr = d.get("training") or {}
    ac = d.get("activation_checkpoint") or {}
    def at(key: str) -> str:
        """``file:line: key`` like the YAML readers (``file: key`` when the line is not found); the command's flag
        when the command set the key."""
        if cli and key in cli:
            return cli[key]
        line = toml_line(text, key)
        return f"{name}:{line}: {key}" if line else f"{name}: {key}"
    for sec, val in (("model", model), ("parallelism", par), ("training", tr), ("activation_checkpoint", ac)):
        if not isinstance(val, dict):
            raise OptkgError(f"{at(sec)}: [{sec}] must be a table")

    def put(setting: str, value: Any, key: str) -> None:
        if value is not None:
            job.set(setting, value, at(key))
    put("tp_size", par.get("tensor_parallel_degree"), "parallelism.tensor_parallel_degree")
    put("pp_size", par.get("pipeline_parallel_degree"), "parallelism.pipeline_parallel_degree")
    put("cp_size", par.get("context_parallel_degree"), "parallelism.context_parallel_degree")
    put("ep_size", par.get("expert_parallel_degree"), "parallelism.expert_parallel_degree")
    put("dp_replicate_size", par.get("data_parallel_replicate_degree"), "parallelism.data_parallel_replicate_degree")
    shard = par.get("data_parallel_shard_degree")
    if shard is not None and shard != -1:
        put("dp_shard_size", shard, "parallelism.data_parallel_shard_degree")
    put("micro_batch_size", tr.get("local_batch_size", tr.get("batch_size")), "training.local_batch_size")
    put("global_batch_size", tr.get("global_batch_size") if tr.get("global_batch_size", -1) != -1 else None,
        "training.global_batch_size")
    if tr.get("global_batch_size", -1) == -1:
        # torchtitan's default global_batch_size -1 means local_batch_size x data-parallel degree (dp_replicate x
        # dp_shard), one gradient-accumulation step (0.3.0 config/configs.py:43-47, trainer.py:415-431; 0.2.1
        # config/job_config.py:248-251, train.py:193-197): local 8 at DP 8 is a global batch of 64 sequences
        job.set("gradient_accumulation_steps", 1, at("training.global_batch_size"))
        job.notes.append("global_batch_size not given: torchtitan uses local_batch_size x data-parallel degree "
                         "(gradient accumulation 1; torchtitan 0.3.0 trainer.py:415-419)")
    put("seq_length", tr.get("seq_len"), "training.seq_len")
    comp = d.get("compile") or {}
    if isinstance(comp, dict) and comp.get("enable") is not None:
        # the model is compiled when compile.enable and "model" is among compile.components (default
        # ["model", "loss"]; 0.2.1 models/llama3/infra/parallelize.py:95-97)
        put("torch_compile", bool(comp.get("enable")) and "model" in (comp.get("components") or ["model"]),
            "compile.enable")
    put("tp_comm_overlap", par.get("enable_async_tensor_parallel"), "parallelism.enable_async_tensor_parallel")
    mode = ac.get("mode")
    if mode == "memory_budget":
        # 0.2.x job_config.py ActivationCheckpoint.mode: torch.compile chooses what to recompute under
        # activation_checkpoint.memory_budget (default 0.5); optkg does not model that choice
        job.set("ac_memory_budget", True, at("activation_checkpoint.mode"))
        job.notes.append(f"{at('activation_checkpoint.mode')} memory_budget: activations are sized without "
                         "recomputation (an upper bound; torch.compile picks what to recompute under the budget)")
    elif mode is not None:
        if mode not in ("none", "selective", "full"):
            raise OptkgError(f"{at('activation_checkpoint.mode')} must be none, selective, full or memory_budget, "
                             f"found {mode!r}")
        job.set("recompute_granularity", mode, at("activation_checkpoint.mode"))
    conv = model.get("converters") or []
    # converter names: "float8" (0.1.0), "quantize.linear.float8" / "quantize.grouped_mm.float8" (0.2.x
    # components/quantization/float8.py:237-238 register_model_converter)
    if {"float8", "quantize.linear.float8"} & set(conv) or (d.get("float8") or {}).get("enable_float8_linear"):
        job.set("fp8", True, f"{name}: model.converters")
    if "quantize.grouped_mm.float8" in conv:
        job.set("float8_moe", True, at("model.converters"))
    mp = tr.get("mixed_precision_param")
    job.set("params_dtype", {"float32": "fp32", "float16": "fp16"}.get(mp, "bf16"), f"{name}: training.mixed_precision_param")
    # torchtitan applies fully_shard only when FSDP is enabled: dp_shard > 1 or cp > 1 (0.3.0
    # distributed/parallel_dims.py:680-693); data_parallel_shard_degree 1 is plain TP/PP, no ZeRO-style sharding
    if shard in (-1, None) and world_size:
        rest = (job.get("tp_size") or 1) * (job.get("pp_size") or 1) * (job.get("cp_size") or 1) * \
            (job.get("dp_replicate_size") or 1)
        shard = world_size // rest if world_size % rest == 0 else -1
    fsdp = shard in (-1, None) or shard > 1 or (job.get("cp_size") or 1) > 1
    # dp_replicate > 1 on top of FSDP is HSDP: fully_shard on the (dp_replicate, fsdp) mesh (0.3.0
    # models/llama3/parallelize.py:74-76); dp_replicate alone is DDP
    hsdp = fsdp and (job.get("dp_replicate_size") or 1) > 1
    job.set("fsdp_sharding", "hybrid_shard" if hsdp else "full_shard" if fsdp else "no_shard",
            f"{name}: parallelism.data_parallel_shard_degree")
    if world_size:
        job.set("world_size", world_size, f"{name}: world size")
    key = (model.get("name"), str(model.get("flavor")))
    if key in FLAVORS and resolver is not None:
        job.model = resolver(FLAVORS[key])
        job.notes.append(f"model {key[0]} {key[1]}: shape from {FLAVORS[key]} (bundled config)")
    elif model.get("name"):
        job.notes.append(f"model {model.get('name')} {model.get('flavor')}: no bundled config; give --config")
    if job.get("dp_shard_size"):
        job.settings["dp_size"] = job.get("dp_shard_size") * (job.get("dp_replicate_size") or 1)
    # world = dp_replicate x dp_shard x cp x tp x pp when every degree is given
    if world_size is None and job.get("dp_shard_size"):
        job.settings["world_size"] = (job.get("dp_shard_size") * (job.get("dp_replicate_size") or 1) *
                                      (job.get("tp_size") or 1) * (job.get("pp_size") or 1) * (job.get("cp_size") or 1))
    return job


def load_torchtitan_toml(path: Path | str, resolver=None, world_size: int | None = None) -> TrainingJob:
    return parse_torchtitan_toml(read_text(path), str(path), resolver, world_size)


def parse_torchtitan_command(text: str, model=None, where: str = "--cmd", base_dir: Path | None = None,
                             resolver=None) -> TrainingJob:
    """A TrainingJob from ``torchrun ... -m torchtitan.train --job.config_file cfg.toml``: the TOML (relative
    to ``base_dir``), the world size from the launcher's ``--nproc_per_node`` x ``--nnodes``."""
    from kg.inputs.training.argv import raw_flags, split_command
    cmd = split_command(text, where)
    world = None
    if cmd.launcher_args.get("gpus_per_node"):
        world = int(cmd.launcher_args["gpus_per_node"]) * int(cmd.launcher_args.get("num_nodes", 1))
    flags = raw_flags(cmd.args)
    if "--module" in flags and "--config" in flags:
        return registry_job(str(flags["--module"]), str(flags["--config"]), flags, model, where, resolver, world)
    cfg = None
    for i, t in enumerate(cmd.args):
        name, eq, val = t.partition("=")
        if name in ("--job.config_file", "--job.config-file"):
            cfg = val if eq else (cmd.args[i + 1] if i + 1 < len(cmd.args) else None)
    if not cfg:
        raise OptkgError(f"{where}: torchtitan command without --job.config_file")
    p = Path(cfg)
    p = p if p.is_absolute() or base_dir is None else base_dir / p
    if not p.exists():
        raise OptkgError(f"{where}: torchtitan config '{cfg}' not found")
    from kg.core.tomlio import loads_toml
    text = read_text(p)
    sections = loads_toml(text, str(p))
    # the command's --section.field overrides win over the TOML (tyro: the CLI is applied after the file,
    # torchtitan 0.3.0 config/manager.py:34-45; 0.2.1 config/job_config.py parse_args_from_command_line)
    cli = _overrides(sections, flags, where, skip=("--job.config_file", "--job.config-file"))
    job = job_from_sections(_typed(sections, cli), text, str(p), resolver, world, cli=cli)
    job.model = model or job.model
    return job


def _overrides(sections: dict[str, Any], flags: dict[str, Any], where: str, skip: tuple[str, ...] = ()
               ) -> dict[str, str]:
    """Apply ``--section.field value`` flags onto ``sections`` in place; returns the dotted keys set, each with
    where it came from (for messages that point at the command, not at the file value it replaced)."""
    cli: dict[str, str] = {}
    for flag, val in flags.items():
        if flag in skip:
            continue
        sec, dot, key = flag[2:].partition(".")
        if dot:
            key = key.replace("-", "_")
            if not isinstance(sections.setdefault(sec, {}), dict):
                raise OptkgError(f"{where}: {flag}: [{sec}] is not a table in the config")
            sections[sec][key] = val
            cli[f"{sec}.{key}"] = f"{where}: {flag}"
    return cli


REGISTRY = Path(__file__).parent / "data" / "config-registry-0.3.0.yaml"


def registry_job(module: str, config: str, flags: dict[str, Any], model, where: str, resolver, world: int | None
                 ) -> TrainingJob:
    """torchtitan 0.3.0's ``--module M --config C`` launch: the sections the release's config registry sets
    (data/config-registry-0.3.0.yaml, from torchtitan/models/<M>/config_registry.py), then the command's
    ``--section.field value`` overrides (tyro: the CLI wins, config/manager.py:34-45)."""
    from difflib import get_close_matches

    from kg.core.yamlio import load_yaml
    reg = load_yaml(REGISTRY).data or {}
    if module not in reg:
        near = get_close_matches(module, list(reg), n=1)
        raise OptkgError(f"{where}: --module {module}: torchtitan 0.3.0 has no such model module"
                         + (f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(reg))})"))
    if config not in reg[module]:
        near = get_close_matches(config, list(reg[module]), n=1)
        raise OptkgError(f"{where}: --config {config}: not in torchtitan 0.3.0's {module} config registry"
                         + (f" (did you mean {near[0]}?)" if near else ""))
    sections = {sec: {k: v for k, v in vals.items() if v != "__unknown__"} for sec, vals in reg[module][config].items()}
    unknown = {f"{sec}.{k}" for sec, vals in reg[module][config].items() for k, v in vals.items() if v == "__unknown__"}
    cli = _overrides(sections, {f: v for f, v in flags.items() if f not in ("--module", "--config")}, where)
    unknown -= set(cli)
    job = job_from_sections(_typed(sections, cli), "", f"{where} (torchtitan 0.3.0 --module {module} --config {config})",
                            resolver, world, cli=cli)
    job.framework_version = "0.3.0"
    job.configs["torchtitan_registry"] = f"{module}.{config}"
    flavor = (module, config.rsplit("_", 1)[-1].upper())
    if model is None and flavor in FLAVORS and resolver is not None:
        job.model = resolver(FLAVORS[flavor])
        job.notes.append(f"--module {module} --config {config}: shape from {FLAVORS[flavor]} (bundled config)")
    job.configs["torchtitan_unknown"] = sorted(unknown)
    job.model = model or job.model
    return job


def _typed(sections: dict[str, dict[str, Any]], cli: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The command's override strings as numbers / booleans where they read as such (the TOML's and the registry's
    own values are typed already). 'nan', 'inf' and overflowing numbers are refused: a degree, a length or a
    batch cannot be one, and optkg would otherwise carry a float no reader expects."""
    def conv(key: str, v: Any) -> Any:
        if key not in cli or not isinstance(v, str):
            return v
        if v.lower() in ("true", "false"):
            return v.lower() == "true"
        try:
            return int(v)
        except ValueError:
            pass
        try:
            f = float(v)
        except ValueError:
            return v
        if not math.isfinite(f):
            raise OptkgError(f"{cli[key]} {v}: not a finite number")
        return f
    return {sec: {k: conv(f"{sec}.{k}", v) for k, v in vals.items()} if isinstance(vals, dict) else vals
            for sec, vals in sections.items()}
