"""Hugging Face training jobs: ``accelerate launch --config_file cfg.yaml train.py ...`` and the
``TrainingArguments`` / TRL flags of the script (``--fsdp``, ``--fsdp_config``, ``--deepspeed``,
``--gradient_checkpointing``, ``--per_device_train_batch_size``, ``--use_peft --lora_r``).

Accelerate config keys (accelerate 1.15.0 ``commands/config/config_args.py``, ``utils/dataclasses.py``
``FullyShardedDataParallelPlugin``): ``distributed_type`` (FSDP, DEEPSPEED, MULTI_GPU),
``num_processes``, ``num_machines``, ``mixed_precision``, ``fsdp_config.fsdp_sharding_strategy``
(FULL_SHARD / SHARD_GRAD_OP / HYBRID_SHARD / HYBRID_SHARD_ZERO2 / NO_SHARD, or the 1-5 codes),
``fsdp_use_orig_params``, ``fsdp_offload_params``, ``fsdp_version``, ``fsdp_activation_checkpointing``,
``deepspeed_config.zero_stage`` / ``offload_optimizer_device`` / ``offload_param_device`` /
``deepspeed_config_file``. TrainingArguments (transformers ``training_args.py``): ``--fsdp`` takes
space-separated options (``full_shard``, ``shard_grad_op``, ``hybrid_shard``, ``offload``,
``auto_wrap``); ``--gradient_checkpointing_kwargs '{"use_reentrant": false}'``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.inputs.modelcfg import ModelFacts
from kg.inputs.training.argv import config_overrides, split_command, walk_flags
from kg.inputs.training.job import TrainingJob

SHARDING = {"FULL_SHARD": "full_shard", "SHARD_GRAD_OP": "shard_grad_op", "HYBRID_SHARD": "hybrid_shard",
            "HYBRID_SHARD_ZERO2": "hybrid_shard_zero2", "NO_SHARD": "no_shard",
            "1": "full_shard", "2": "shard_grad_op", "3": "no_shard", "4": "hybrid_shard", "5": "hybrid_shard_zero2"}
PRECISION = {"bf16": "bf16", "fp16": "fp16", "no": "fp32", "fp8": "bf16"}

V, T = "value", "true"
FLAGS: dict[str, tuple[str, Any]] = {
    "--fsdp": (V, "_fsdp"),
    "--fsdp_config": (V, "_fsdp_config"),
    # HF TrainingArguments' --deepspeed FILE; DeepSpeed's own add_config_arguments has a --deepspeed switch and
    # --deepspeed_config FILE (deepspeed 0.19.8 deepspeed/__init__.py:628-633), the form of its tutorials
    "--deepspeed": ("maybe", "_deepspeed"),
    "--deepspeed_config": (V, "_deepspeed_config"),
    "--gradient_checkpointing": (T, "_gc"),
    "--gradient_checkpointing_kwargs": (V, "_gc_kwargs"),
    "--per_device_train_batch_size": (V, "micro_batch_size"),
    "--gradient_accumulation_steps": (V, "gradient_accumulation_steps"),
    "--bf16": (T, "_bf16"),
    "--fp16": (T, "_fp16"),
    "--max_seq_length": (V, "seq_length"),
    "--max_length": (V, "seq_length"),
    "--block_size": (V, "seq_length"),
    "--model_max_length": (V, "seq_length"),
    "--use_peft": ("const:lora", "peft"),
    "--use_peft_lora": ("const:lora", "peft"),
    "--tp_size": (V, "tp_size"),
    "--lora_r": (V, "lora_rank"),
    "--optim": (V, "_optim"),
    "--optim_args": (V, "_optim_args"),
    "--model_name_or_path": (V, "_model"),
    # OpenRLHF CLI (openrlhf/cli/train_*.py)
    "--train_batch_size": (V, "global_batch_size"),
    "--micro_train_batch_size": (V, "micro_batch_size"),
    "--zero_stage": (V, "zero_stage"),
    "--adam_offload": ("const:cpu", "offload_optimizer"),
    "--lora_rank": (V, "_lora_rank"),
    "--pretrain": (V, "_model"),
    "--max_len": (V, "seq_length"),
    # TRL (trl 1.16.0 GRPOConfig / SFTConfig / ModelConfig fields) and open-r1 recipes
    "--num_generations": (V, "num_generations"),
    "--steps_per_generation": (V, "steps_per_generation"),
    "--max_prompt_length": (V, "_max_prompt"),
    "--max_completion_length": (V, "_max_completion"),
    "--packing": (T, "packing"),
    "--load_in_4bit": (T, "_4bit"),
    "--load_in_8bit": (T, "_8bit"),
    "--bnb_4bit_quant_storage": (V, "quant_storage"),
    # peft's examples/sft/train.py ModelArguments (huggingface/peft@1715e065 examples/sft/run_peft_qlora_fsdp.sh)
    "--use_4bit_quantization": (T, "_4bit"),
    "--use_8bit_quantization": (T, "_8bit"),
    "--bnb_4bit_quant_storage_dtype": (V, "quant_storage"),
    "--lora_target_modules": (V, "_ignore"),
    # LLaMA-Factory (src/llamafactory/hparams: ModelArguments, DataArguments, FinetuningArguments)
    "--cutoff_len": (V, "seq_length"),
    "--finetuning_type": (V, "_finetuning_type"),
    "--quantization_bit": (V, "_quantization_bit"),
    "--stage": (V, "trainer"),
    "--disable_gradient_checkpointing": (T, "_lf_no_gc"),
}
# TRL trainers whose config class defaults gradient_checkpointing to true from trl 0.22.0 (sft_config.py:111-112,
# dpo_config.py:205-206, grpo_config.py:247-248, kto/orpo/rloo likewise at 0.22.0; 0.21.0 leaves TrainingArguments'
# false; trl 1.16.0 base_config.py:62-63 for all of them); PPOConfig keeps false at 0.22.0
TRL_GC_TRAINERS = ("sft", "dpo", "grpo", "kto", "orpo", "rloo")
# TRL trainer scripts and CLI subcommands -> the trainer they run (open-r1 src/open_r1/grpo.py, `trl grpo ...`)
TRAINER_SCRIPTS = {"grpo": "grpo", "sft": "sft", "dpo": "dpo", "ppo": "ppo", "kto": "kto", "orpo": "orpo", "rloo": "rloo"}


def trainer_optimizer(name: str) -> str:
    """TrainingArguments --optim as the optimizer whose states are sized (kg.derive.training_memory): the family, with
    "-8bit" / "-4bit" for the low-bit states of bitsandbytes (transformers 5.24.0 trainer_optimizer.py:253-289: optim_bits
    8 when "8bit" is in the name, AdamW / Lion / RMSprop / AdEMAMix by name) and torchao (:460-467 AdamW8bit /
    AdamW4bit); 32-bit and paged variants keep the family's states."""
    o = name.lower()
    fam = next((f for f in ("ademamix", "lion", "rmsprop", "adafactor", "adagrad") if f in o), None)
    fam = fam or ("adamw" if "adam" in o else o)
    bits = "-8bit" if "8bit" in o else "-4bit" if "4bit" in o else ""
    return fam + bits if fam in ("adamw", "lion", "rmsprop", "ademamix") else fam


def _sgd_momentum(optim_args: str) -> float:
    """The momentum in an ``--optim_args`` string (``key=value`` pairs split at commas, spaces dropped:
    transformers 5.24.0 trainer_optimizer.py:65-73); 0 when absent or not a number."""
    for pair in optim_args.replace(" ", "").split(","):
        key, _, value = pair.partition("=")
        if key == "momentum":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 0.0


def _fsdp_options(job: TrainingJob, value: str, where: str) -> None:
    opts = str(value).replace(",", " ").split()
    for o in opts:
        if o in ("full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard"):
            job.set("fsdp_sharding", o, where)
        elif o == "offload":
            job.set("offload_param", "cpu", where)
            job.set("offload_optimizer", "cpu", where)
    if opts and "fsdp_sharding" not in job.settings and any(o == "auto_wrap" for o in opts):
        job.set("fsdp_sharding", "full_shard", where)


ACCELERATE_KEYS = Path(__file__).parent / "data" / "accelerate-config-keys-1.15.0.yaml"


def _unknown_accelerate_keys(job: TrainingJob, data: dict, at) -> None:
    """Top-level keys accelerate 1.15.0 refuses (data/accelerate-config-keys-1.15.0.yaml, generated by
    tools/accelerate_config_keys.py): BaseConfig.from_yaml_file raises "The config file at ... had unknown keys"
    (commands/config/config_args.py:154-159). Kept as (file:line: key, nearest key) for the package's ERROR."""
    from difflib import get_close_matches
    from kg.core.yamlio import load_yaml
    spec = load_yaml(ACCELERATE_KEYS).data
    sagemaker = str(data.get("compute_environment", "")).upper() == "AMAZON_SAGEMAKER"
    known = set(spec["sagemaker" if sagemaker else "cluster"]) | set(spec["legacy_keys"])
    bad = [[at(str(k)), (get_close_matches(str(k), sorted(known), n=1) or [""])[0]] for k in data if str(k) not in known]
    if bad:
        job.configs["accelerate_unknown_keys"] = bad


def apply_accelerate_config(job: TrainingJob, data: Any, name: str, where=None, base_dir: Path | None = None) -> None:
    """Set ``job``'s settings from a parsed accelerate config mapping."""
    if not isinstance(data, dict):
        raise OptkgError(f"{name}: an accelerate config must be a mapping")

    def at(*path: str) -> str:
        return f"{name}:{where(tuple(path))[0]}: {'.'.join(path)}" if where else f"{name}: {'.'.join(path)}"
    _unknown_accelerate_keys(job, data, at)
    dist = str(data.get("distributed_type", "")).upper()
    if data.get("num_processes") is not None:
        job.set("world_size", data["num_processes"], at("num_processes"))
    if data.get("num_machines") is not None:
        job.set("num_nodes", data["num_machines"], at("num_machines"))
    mp = data.get("mixed_precision")
    if mp is not None:
        if str(mp) not in PRECISION:
            raise OptkgError(f"{at('mixed_precision')} must be one of no, fp16, bf16, fp8, found {mp!r}")
        job.set("params_dtype", PRECISION[str(mp)], at("mixed_precision"))
        if str(mp) in ("fp16", "bf16", "fp8"):
            job.configs.setdefault("launch_mixed_precision", []).append(str(mp))
        if mp == "fp8":
            job.set("fp8", True, at("mixed_precision"))
    if dist == "FSDP":
        job.framework = "fsdp"
        fc = data.get("fsdp_config") or {}
        if not isinstance(fc, dict):
            raise OptkgError(f"{at('fsdp_config')} must be a mapping")
        strat = fc.get("fsdp_sharding_strategy", fc.get("fsdp_reshard_after_forward"))
        if strat is not None and str(strat).upper() in SHARDING:
            job.set("fsdp_sharding", SHARDING[str(strat).upper()], at("fsdp_config", "fsdp_sharding_strategy"))
        elif strat in (True, "true"):
            job.set("fsdp_sharding", "full_shard", at("fsdp_config", "fsdp_reshard_after_forward"))
        elif strat in (False, "false"):
            job.set("fsdp_sharding", "shard_grad_op", at("fsdp_config", "fsdp_reshard_after_forward"))
        else:
            job.set("fsdp_sharding", "full_shard", at("fsdp_config"))  # FSDP plugin default: FULL_SHARD
        if fc.get("fsdp_auto_wrap_policy") is not None:
            job.set("fsdp_auto_wrap_policy", str(fc["fsdp_auto_wrap_policy"]), at("fsdp_config", "fsdp_auto_wrap_policy"))
        if "fsdp_use_orig_params" in fc:
            job.set("use_orig_params", fc["fsdp_use_orig_params"], at("fsdp_config", "fsdp_use_orig_params"))
        if fc.get("fsdp_offload_params") in (True, "true"):
            job.set("offload_param", "cpu", at("fsdp_config", "fsdp_offload_params"))
            job.set("offload_optimizer", "cpu", at("fsdp_config", "fsdp_offload_params"))
        if fc.get("fsdp_version") is not None:
            job.set("fsdp_version", fc["fsdp_version"], at("fsdp_config", "fsdp_version"))
        if fc.get("fsdp_activation_checkpointing") in (True, "true"):
            job.set("recompute_granularity", "full", at("fsdp_config", "fsdp_activation_checkpointing"))
    elif dist == "DEEPSPEED":
        job.framework = "deepspeed"
        dc = data.get("deepspeed_config") or {}
        if not isinstance(dc, dict):
            raise OptkgError(f"{at('deepspeed_config')} must be a mapping")
        _accelerate_ds_fields(job, data, dc, name.endswith("accelerate launch"), at("deepspeed_config"))
        if dc.get("deepspeed_config_file"):
            from kg.frameworks.deepspeed.reader import load_deepspeed_config
            p = Path(dc["deepspeed_config_file"])
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            if not p.exists():
                raise OptkgError(f"{at('deepspeed_config', 'deepspeed_config_file')}: '{p}' not found")
            load_deepspeed_config(p, job)
            job.configs["deepspeed_integration"] = "transformers / accelerate"
        if dc.get("zero_stage") is not None:
            job.set("zero_stage", dc["zero_stage"], at("deepspeed_config", "zero_stage"))
        if "optimizer_source" not in job.settings:
            # no ds_config file with an `optimizer` section: the training script builds the optimizer
            job.set("optimizer_source", "client", at("deepspeed_config"))
        if dc.get("gradient_accumulation_steps") is not None:
            job.set("gradient_accumulation_steps", dc["gradient_accumulation_steps"],
                    at("deepspeed_config", "gradient_accumulation_steps"))
        for key, setting in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_param")):
            if dc.get(key) is not None:
                job.set(setting, str(dc[key]).lower(), at("deepspeed_config", key))


# accelerate 1.15.0 DeepSpeedPlugin._deepspeed_config_checks (utils/dataclasses.py:1510-1530): with a
# deepspeed_config_file, these keys of the config file's deepspeed_config section (ACCELERATE_CONFIG_DS_FIELDS,
# commands/launch.py:1394-1397), and mixed_precision when it comes from the config file rather than the command line
# (:1287-1292), are refused
ACCELERATE_DS_IGNORED = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                         "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
                         "zero3_save_16bit_model", "mixed_precision")


def _accelerate_ds_fields(job: TrainingJob, data: dict, dc: dict, cli: bool, where: str) -> None:
    """Record the accelerate config fields a deepspeed_config_file makes accelerate refuse (file first, then the
    command line: a --mixed_precision there is not from the config file)."""
    c = job.configs
    if cli:
        c["acc_cli_mixed_precision"] = c.get("acc_cli_mixed_precision") or data.get("mixed_precision") is not None
    else:
        c["acc_file_ds_fields"] = list(dc) + (["mixed_precision"] if data.get("mixed_precision") is not None else [])
    c["acc_ds_config_file"] = c.get("acc_ds_config_file") or bool(dc.get("deepspeed_config_file"))
    fields = [f for f in c.get("acc_file_ds_fields", []) if f in ACCELERATE_DS_IGNORED
              and not (f == "mixed_precision" and c.get("acc_cli_mixed_precision"))]
    if c["acc_ds_config_file"] and fields:
        job.set("accelerate_ds_fields_ignored", ", ".join(fields), where)
    else:
        job.settings.pop("accelerate_ds_fields_ignored", None)


# accelerate launch's own flags -> the accelerate config key they stand for (accelerate 1.15.0 commands/launch.py:
# --mixed_precision :190, --num_processes :198, --num_machines :201, --use_deepspeed :254, --use_fsdp :260,
# --deepspeed_config_file :411, --zero_stage :417, --offload_optimizer_device :424, --offload_param_device :431,
# --gradient_accumulation_steps :452, --fsdp_version :514, --fsdp_offload_params :521, --fsdp_sharding_strategy :534,
# --fsdp_reshard_after_forward :540, --fsdp_use_orig_params :578, --fsdp_activation_checkpointing :600); the command
# line wins over --config_file (launch.py:1236-1246 fills only what the command left unset)
ACCELERATE_CLI: dict[str, tuple[str, ...]] = {
    "--mixed_precision": ("mixed_precision",),
    "--num_processes": ("num_processes",), "--num_machines": ("num_machines",),
    "--deepspeed_config_file": ("deepspeed_config", "deepspeed_config_file"),
    "--zero_stage": ("deepspeed_config", "zero_stage"),
    "--offload_optimizer_device": ("deepspeed_config", "offload_optimizer_device"),
    "--offload_param_device": ("deepspeed_config", "offload_param_device"),
    "--gradient_accumulation_steps": ("deepspeed_config", "gradient_accumulation_steps"),
    "--fsdp_version": ("fsdp_config", "fsdp_version"),
    "--fsdp_offload_params": ("fsdp_config", "fsdp_offload_params"),
    "--fsdp_sharding_strategy": ("fsdp_config", "fsdp_sharding_strategy"),
    "--fsdp_reshard_after_forward": ("fsdp_config", "fsdp_reshard_after_forward"),
    "--fsdp_use_orig_params": ("fsdp_config", "fsdp_use_orig_params"),
    "--fsdp_activation_checkpointing": ("fsdp_config", "fsdp_activation_checkpointing"),
}


def _accelerate_cli(job: TrainingJob, raw: dict[str, str], where: str, base_dir: Path) -> list[str]:
    """Apply ``accelerate launch``'s own flags (``raw``: flag -> value as written) like the same keys of an
    accelerate config file; returns the flags read."""
    norm = {k.replace("-", "_").replace("__", "--", 1) if k.startswith("--") else k: v for k, v in raw.items()}
    used = [k for k in norm if k in ACCELERATE_CLI or k in ("--use_fsdp", "--use_deepspeed")]
    if not used:
        return []
    data: dict[str, Any] = {}
    flag_of: dict[tuple[str, ...], str] = {}
    for flag, path in ACCELERATE_CLI.items():
        if flag in norm:
            if not norm[flag]:
                raise OptkgError(f"{where}: accelerate launch {flag} needs a value")
            val: Any = norm[flag]
            if path[-1] in ("fsdp_offload_params", "fsdp_use_orig_params", "fsdp_activation_checkpointing"):
                val = str(val).lower()
            node = data
            for k in path[:-1]:
                node = node.setdefault(k, {})
            node[path[-1]] = val
            flag_of[path] = flag
    if "--use_fsdp" in norm:
        data["distributed_type"] = "FSDP"
        fc = data.setdefault("fsdp_config", {})
        if "fsdp_use_orig_params" not in fc and "use_orig_params" not in job.settings:
            fc["fsdp_use_orig_params"] = "true"  # --fsdp_use_orig_params default "true" (launch.py:578-580)
            flag_of[("fsdp_config", "fsdp_use_orig_params")] = "--use_fsdp (--fsdp_use_orig_params default true)"
        flag_of.setdefault(("fsdp_config",), "--use_fsdp")
    elif "--use_deepspeed" in norm:
        data["distributed_type"] = "DEEPSPEED"
        flag_of.setdefault(("deepspeed_config",), "--use_deepspeed")
    elif job.framework in ("fsdp", "deepspeed"):
        data.setdefault("fsdp_config", {})
        data["distributed_type"] = "FSDP" if job.framework == "fsdp" else "DEEPSPEED"  # from --config_file
    fc = data.get("fsdp_config")
    if data.get("distributed_type") == "FSDP" and "fsdp_sharding_strategy" not in fc \
            and "fsdp_reshard_after_forward" not in fc and job.get("fsdp_sharding"):
        fc["fsdp_sharding_strategy"] = job.get("fsdp_sharding").upper()  # from --config_file
    apply_accelerate_config(job, data, f"{where}: accelerate launch",
                            lambda path: (" " + flag_of.get(tuple(path), flag_of.get(tuple(path[:1]), "")),), base_dir)
    return used


LLAMAFACTORY_KEYS = ("stage", "finetuning_type", "cutoff_len", "template")


def _config_file_args(cmd, base: Path, where: str) -> tuple[list[tuple[list[str], Path]], set[int]]:
    """The script's own config files as flag lists: TRL's ``--config recipe.yaml`` (TrlParser: the YAML sets
    defaults, the command line wins) and a positional ``.yaml``/``.json`` (HfArgumentParser.parse_yaml_file,
    LLaMA-Factory's ``llamafactory-cli train x.yaml`` / ``src/train.py x.yaml``). Paths relative to ``base``
    or to the folders above the config (a recipe names files from its repository's root). Returns the flag
    lists with their files and the positions of the command's arguments they consumed."""
    out = []
    used: set[int] = set()
    args = cmd.args
    for i, t in enumerate(args):
        name, eq, val = t.partition("=")
        path = None
        if name == "--config":
            path = val if eq else (args[i + 1] if i + 1 < len(args) else None)
            used |= {i} | (set() if eq else {i + 1})
        elif not t.startswith("-") and t.endswith((".yaml", ".yml", ".json")) and (i == 0 or (i == 1 and args[0] == "train")) \
                and not (i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1]):
            path = t
            used.add(i)
        if not path:
            continue
        p = find_file(path, [base])
        if p is None and cmd.launcher == "tune" and not path.endswith((".yaml", ".yml", ".json")):
            # torchtune's `tune run <recipe> --config <name>`: a name like llama3_1/8B_full is one of the configs
            # torchtune ships (its README; `tune ls` lists them), which optkg does not bundle
            raise OptkgError(f"{where}: --config {path} names a torchtune built-in config, which optkg does not "
                             f"bundle; copy it with `tune cp {path} my_config.yaml` and give that YAML's path")
        if p is None:
            raise OptkgError(f"{where}: config '{path}' not found")
        out.append((config_args(load_yaml(p).data, str(p)), p))
    return out, used


def find_file(path: str, bases: list[Path]) -> Path | None:
    """``path`` as given, else under one of ``bases`` or their parents (up to 4 levels)."""
    p = Path(path)
    if p.is_absolute():
        return p if p.exists() else None
    for b in bases:
        for d in [b, *list(b.resolve().parents)[:4]]:
            if (d / p).exists():
                return d / p
    return None


def config_args(data: Any, name: str) -> list[str]:
    """A TrainingArguments-style mapping as the flags it stands for (``key: value`` -> ``--key value``)."""
    if not isinstance(data, dict):
        raise OptkgError(f"{name}: a trainer config is a mapping of arguments")
    out: list[str] = []
    for k, v in data.items():
        if v is None or isinstance(v, list):
            continue
        if isinstance(v, dict):
            v = json.dumps(v)
        out += [f"--{k}", "true" if v is True else "false" if v is False else str(v)]
    return out


def parse_hf_command(text: str, model: ModelFacts | None = None, where: str = "--cmd", base_dir: Path | None = None,
                     resolver=None) -> TrainingJob:
    """A TrainingJob from ``accelerate launch [--config_file cfg.yaml] train.py --flags`` or a
    ``torchrun``/``python`` command running a Trainer script. Files are read relative to ``base_dir``."""
    cmd = split_command(text, where)
    job = TrainingJob(framework="hf-trainer", model=model, source=where,
                      name=(cmd.script or "train").rsplit("/", 1)[-1])
    base = base_dir or Path(".")
    for key in ("gpus_per_node", "num_nodes", "world_size"):
        if key in cmd.launcher_args:
            job.set(key, cmd.launcher_args[key], f"{where}: launcher {key}")
    if "config_file" in cmd.launcher_args:
        p = Path(cmd.launcher_args["config_file"])
        p = p if p.is_absolute() else base / p
        if not p.exists():
            raise OptkgError(f"{where}: accelerate config '{cmd.launcher_args['config_file']}' not found")
        doc = load_yaml(p)
        apply_accelerate_config(job, doc.data, str(p), doc.where, p.parent)
    read_cli = _accelerate_cli(job, cmd.launcher_raw, where, base) if cmd.launcher == "accelerate" else []
    state: dict[str, Any] = {}

    def apply(target: str, val: Any, flag: str) -> None:
        w = f"{where}: {flag}"
        state["flags_read"] = state.get("flags_read", 0) + 1
        if target == "_fsdp":
            job.framework = "fsdp"
            _fsdp_options(job, val, w)
            if "use_orig_params" not in job.settings:
                # TrainingArguments passes use_orig_params from --fsdp_config, default "true" (transformers 5.24.0
                # training_args.py:2876-2877; accelerate's own FSDP1 default is false); an --fsdp_config read
                # below may still set it
                job.set("use_orig_params", True, f"{w}: TrainingArguments default use_orig_params true")
        elif target == "_fsdp_config":
            state["fsdp_config"] = val
        elif target in ("_deepspeed", "_deepspeed_config"):
            job.framework = "deepspeed"
            if val is None:
                return  # DeepSpeed's --deepspeed switch: the file comes with --deepspeed_config
            from kg.frameworks.deepspeed.reader import load_deepspeed_config
            p = find_file(str(val), state.get("bases") or [base])
            if p is None:
                raise OptkgError(f"{w}: DeepSpeed config '{val}' not found")
            load_deepspeed_config(p, job)
            if target == "_deepspeed":  # TrainingArguments --deepspeed FILE: the Trainer's accelerate plugin reads it
                job.configs["deepspeed_integration"] = "transformers / accelerate"
            else:  # DeepSpeed's own --deepspeed_config: the script hands it to deepspeed.initialize
                job.configs["deepspeed_direct"] = True
        elif target == "_lf_no_gc":
            state["lf_no_gc"] = bool(val)
        elif target == "_gc":
            state["gc_given"] = True
            if val:
                job.set("recompute_granularity", "full", w)
                state["gc"] = True
        elif target == "_lora_rank":
            job.set("lora_rank", val, w)
            if int(val) > 0:
                job.set("peft", "lora", w)
        elif target == "_gc_kwargs":
            try:
                kw = json.loads(str(val))
            except ValueError:
                raise OptkgError(f"{w} must be a JSON object, found {val!r}") from None
            if isinstance(kw, dict) and "use_reentrant" in kw:
                job.set("use_reentrant", kw["use_reentrant"], w)
        elif target in ("_bf16", "_fp16"):
            if val:
                job.set("params_dtype", target[1:], w)
                job.configs.setdefault("launch_mixed_precision", []).append(target[1:])
        elif target == "_optim":
            job.set("optimizer", trainer_optimizer(str(val)), w)
        elif target == "_optim_args":
            state["optim_args"] = str(val)
        elif target == "_model":
            state["model"] = str(val)
        elif target in ("_max_prompt", "_max_completion"):
            state[target] = int(val)
        elif target in ("_4bit", "_8bit"):
            if val:
                job.set("weight_quantization", f"bnb-{target[1:]}", w)
        elif target == "_quantization_bit":
            if str(val) in ("4", "8"):  # LLaMA-Factory: bitsandbytes unless quantization_method says otherwise
                job.set("weight_quantization", f"bnb-{val}bit", w)
        elif target == "_finetuning_type":
            if str(val) in ("lora", "oft"):
                job.set("peft", str(val), w)
        elif target == "_ignore":
            pass
        else:
            if flag == "--stage":
                state["llamafactory"] = True
            job.set(target, val, w)

    configs, used = _config_file_args(cmd, base, where)
    for cfg_args, cfg_path in configs:
        state["bases"] = [base, cfg_path.parent]
        state["llamafactory"] = state.get("llamafactory") or any(f"--{k}" in cfg_args for k in LLAMAFACTORY_KEYS)
        walk_flags(cfg_args, FLAGS, apply, job.ignored, str(cfg_path))
    state["bases"] = [base]
    walk_flags([a for i, a in enumerate(cmd.args) if i not in used], FLAGS, apply, job.ignored, where)
    script = (cmd.script or "").rsplit("/", 1)[-1].removesuffix(".py")
    if script.startswith("trl.scripts."):  # python -m trl.scripts.sft runs trl 1.16.0 trl/scripts/sft.py, as `trl sft` does
        script = script.rsplit(".", 1)[-1]
    trainer = TRAINER_SCRIPTS.get(script) or (TRAINER_SCRIPTS.get(cmd.args[0]) if script == "trl" and cmd.args else None)
    if trainer and "trainer" not in job.settings:
        job.set("trainer", trainer, f"{where}: {cmd.script}")
        if trainer == "grpo":
            # TRL's GRPO trainer makes its own startup checks (kg/frameworks/trl): the job is TRL's, sharded as its
            # accelerate setup says; framework_version is then TRL's release
            job.notes.append(f"TRL GRPO trainer ({cmd.script}) on {job.framework}")
            job.framework = "trl"
    if job.framework == "hf-trainer" and not trainer and not state.get("flags_read") and cmd.launcher != "accelerate":
        # the fallback reader took a script that shows nothing of the HF Trainer: say it was a guess (newuser3 #15)
        gave = f" ({', '.join(job.ignored)} not TrainingArguments)" if job.ignored else ""
        over = config_overrides(cmd.args)
        if over:  # HfArgumentParser refuses positional tokens: a recipe script's overrides, none of them read
            gave += f"; its config overrides ({', '.join(over[:3])}{', ...' if len(over) > 3 else ''}) were not read"
        job.configs["framework_assumed"] = (
            f"framework hf-trainer because no framework claims {cmd.script} and none of its flags is an HF "
            f"TrainingArguments / TRL one{gave}; only the launch's layout was read, so little was checked")
        job.notes.append("assumed: " + job.configs["framework_assumed"])
    if not state.get("gc") and "recompute_granularity" not in job.settings:
        # checkpointing the framework turns on by itself (kg.frameworks.hf_trainer.defaults.apply_checkpointing_default)
        if state.get("llamafactory") or "llamafactory" in (cmd.script or ""):
            if not state.get("lf_no_gc"):
                job.configs["gc_default"] = "llamafactory"
        elif job.get("trainer") in TRL_GC_TRAINERS and not state.get("gc_given"):
            job.configs["gc_default"] = "trl"
    if state.get("_max_prompt") or state.get("_max_completion"):
        if "seq_length" not in job.settings:
            job.set("seq_length", state.get("_max_prompt", 0) + state.get("_max_completion", 0),
                    f"{where}: max_prompt_length + max_completion_length")
    if job.get("weight_quantization") == "bnb-4bit" and "quant_storage" not in job.settings and state.get("llamafactory") \
            and job.framework in ("fsdp", "deepspeed"):
        # LLaMA-Factory stores 4-bit weights in the compute dtype under FSDP / ZeRO-3 ("crucial for fsdp+qlora",
        # src/llamafactory/model/model_utils/quantization.py:189 at hiyouga/LLaMA-Factory@ff6d4d12)
        job.set("quant_storage", job.get("params_dtype", "bf16"), f"{where}: LLaMA-Factory's quantization setup")
    if "openrlhf" not in (cmd.script or ""):
        # the script's HfArgumentParser arguments as given (config files first, the command line wins), for the
        # TrainingArguments / TRL config checks generated from their source (kg/frameworks/hf_trainer, trl)
        from kg.inputs.training.argv import raw_flags
        given: dict[str, Any] = {}
        for cfg_args, _ in configs:
            given.update(raw_flags(cfg_args))
        given.update(raw_flags([a for i, a in enumerate(cmd.args) if i not in used]))
        job.configs["training_arguments"] = {k[2:].replace("-", "_"): v for k, v in given.items()}
    if "openrlhf" in (cmd.script or ""):
        job.framework = "openrlhf"
        if "zero_stage" in job.settings and job.framework == "openrlhf":
            job.set("optimizer_source", "config", f"{where}: OpenRLHF builds the DeepSpeed optimizer in its ds_config")
    if state.get("gc") and "use_reentrant" not in job.settings:
        # transformers 5 checkpoints non-reentrantly unless told otherwise (modeling_utils.py:3157-3158 at 5.24.0)
        job.settings["use_reentrant"] = False
    if state.get("fsdp_config"):
        p = Path(state["fsdp_config"])
        p = p if p.is_absolute() else base / p
        if p.exists():
            doc = load_yaml(p)
            fc = doc.data if isinstance(doc.data, dict) else {}
            fc = {k if k.startswith("fsdp_") else f"fsdp_{k}": v for k, v in fc.items()}
            apply_accelerate_config(job, {"distributed_type": "FSDP", "fsdp_config": {**fc, **(
                {"fsdp_sharding_strategy": job.get("fsdp_sharding").upper()} if job.get("fsdp_sharding") else {})}},
                str(p), None)
    if job.get("optimizer") == "sgd" and not _sgd_momentum(state.get("optim_args", "")):
        # torch SGD keeps a momentum buffer only when momentum != 0 (its default); TrainingArguments passes momentum
        # only through --optim_args "momentum=..." (transformers 5.24.0 trainer_optimizer.py:65-73, :317-326)
        job.set("optimizer", "sgd-no-momentum", f"{where}: --optim sgd without a momentum in --optim_args")
    if job.model is None and state.get("model") and resolver is not None:
        try:
            job.model = resolver(state["model"])
        except OptkgError as e:
            job.notes.append(f"--model_name_or_path {state['model']}: {e}")
    job.ignored.extend(n for n in cmd.ignored if n.replace("-", "_").replace("__", "--", 1) not in read_cli)
    return job
