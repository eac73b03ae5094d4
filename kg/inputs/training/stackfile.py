"""The stack YAML for a training job: ``framework:`` (+ ``framework_version:``) and ``training:`` settings.

Shape::

    name: Llama-3.1-70B pretraining           # optional
    framework: megatron                       # a framework of kg.frameworks (or catalog/frameworks/)
    framework_version: "0.16.1"               # optional; rules with release ranges use it
    model: meta-llama/Llama-3.1-70B           # bundled hub id, or a folder/file with config.json
    hardware: {gpu: H100, count: 512, gpus_per_node: 8}
    training:                                 # canonical names of kg.inputs.training.job.SETTINGS
      tp_size: 8
      pp_size: 4
      sequence_parallel: true
      distributed_optimizer: true
      micro_batch_size: 1
      global_batch_size: 1024
      seq_length: 4096
    command: "torchrun ... pretrain_gpt.py ..."   # optional, read by the framework's command reader
    config_file: ds_config.json               # optional DeepSpeed JSON / accelerate YAML / torchtitan TOML

Errors name ``file:line`` and the field; unknown fields are errors with the nearest known name.

Also ``load_training_file`` (any training file, by content; a stack file may name a ``config_file``, so
the two read each other and live in one module) and ``is_training_file``.
"""
from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import YamlDoc, load_yaml
from kg.inputs.training.job import SETTINGS, TrainingJob, derive_virtual_pipeline

TOP_KEYS = ("name", "description", "framework", "framework_version", "model", "config", "hardware", "training",
            "command", "config_file", "techniques", "settings")
# catalog techniques a stack lists -> training settings (their parameters with canonical names are read too)
TECHNIQUE_SETTINGS: dict[str, dict[str, Any]] = {
    "sequence-parallelism": {"sequence_parallel": True},
    "zero-1": {"zero_stage": 1}, "zero-2": {"zero_stage": 2}, "zero-3-fsdp": {"zero_stage": 3},
    "activation-checkpointing": {"recompute_granularity": "full"},
    "lora-finetuning": {"peft": "lora"},
    "fp8-training": {"fp8": True},
    "optimizer-offload": {"offload_optimizer": "cpu"},
    "mixed-precision-bf16": {"params_dtype": "bf16"},
}
# stack `settings:` names of catalog/settings/training.yaml that differ from ours
SETTING_ALIASES = {"precision": "params_dtype"}


def is_training_stack(data: Any) -> bool:
    return isinstance(data, dict) and ("framework" in data or "training" in data)


def job_from_stack_doc(doc: YamlDoc, path: str, catalog, resolver) -> TrainingJob:
    """A TrainingJob from a parsed stack YAML (see module doc)."""
    d = doc.data

    def at(*keys: Any) -> str:
        return f"{path}:{doc.where(tuple(keys))[0]}"
    for k in d:
        if k not in TOP_KEYS:
            near = get_close_matches(str(k), TOP_KEYS, n=1)
            raise OptkgError(f"{at(k)}: unknown field '{k}'" + (f"; did you mean '{near[0]}'?" if near else ""))
    fw = d.get("framework")
    version = d.get("framework_version")
    if isinstance(fw, dict):  # framework: {name:, version:} (kg.inputs.stack's shape)
        version = fw.get("version", version)
        fw = fw.get("name")
    from kg.frameworks import registry
    if fw is None:
        raise OptkgError(f"{path}: a training stack needs `framework:` (one of {', '.join(registry.ids())})")
    from kg.inputs.runtimes import resolve_framework as catalog_framework
    fw = registry.resolve(catalog_framework(fw, f"{at('framework')}: framework")) or str(fw)
    base = Path(path).parent
    model = None
    if d.get("config"):
        from kg.inputs.modelcfg import load_config_file
        kind = training_file_kind(base / str(d["config"]))
        if kind:  # the training config under the model's key: say which key the user must write
            raise OptkgError(f"{at('config')}: config: {d['config']} is {kind}, not the model's config.json; "
                             f"write it as `config_file: {d['config']}` (`config:` names the model's Hugging Face "
                             "config.json)")
        model = load_config_file(base / str(d["config"]))
    elif d.get("model"):
        model = resolver(str(d["model"]))
    job: TrainingJob
    if d.get("command"):
        from kg.inputs.training.command import parse_training_command
        job = parse_training_command(str(d["command"]), model=model, where=at("command"), base_dir=base,
                                     resolver=resolver, framework=fw)
    else:
        job = TrainingJob(framework=fw, model=model)
    if d.get("config_file"):
        cf = base / str(d["config_file"])
        if cf.exists() and not training_file_kind(cf) and _looks_like_model_config(cf):
            raise OptkgError(f"{at('config_file')}: config_file: {d['config_file']} is a model's config.json, not a "
                             f"training config; write it as `config: {d['config_file']}` (`config_file:` names a "
                             "DeepSpeed JSON, an accelerate config or a torchtitan TOML)")
        load_training_file(cf, catalog, resolver, job=job)
    job.framework = fw
    job.source = path
    job.name = str(d.get("name") or Path(path).stem)
    if version is not None:
        from kg.inputs.stack import check_engine_version
        job.framework_version = check_engine_version(version, f"{at('framework_version')}: framework_version",
                                                     "a framework version number")
    for i, t in enumerate(d.get("techniques") or []):
        tid, params = (next(iter(t.items())) if isinstance(t, dict) and len(t) == 1 else (t, {}))
        if not isinstance(tid, str) or not isinstance(params or {}, dict):
            raise OptkgError(f"{at('techniques', i)}: a technique is an id or {{id: {{parameter: value}}}}")
        for k, v in TECHNIQUE_SETTINGS.get(tid, {}).items():
            job.set(k, v, f"{at('techniques', i)}: technique {tid}")
        for k, v in (params or {}).items():
            if k in SETTINGS:
                job.set(k, v, f"{at('techniques', i)}: {tid}.{k}")
    tr = {**(d.get("settings") or {}), **(d.get("training") or {})} if isinstance(d.get("training") or {}, dict) \
        and isinstance(d.get("settings") or {}, dict) else d.get("training")
    if not isinstance(tr, dict):
        raise OptkgError(f"{at('training')}: `training:` must be a mapping of settings")
    for k, v in tr.items():
        if k == "precision" and str(v) == "fp8":
            job.set("fp8", True, f"{at('settings', k)}: settings.precision")
            continue
        k = SETTING_ALIASES.get(k, k)
        if k not in SETTINGS:
            near = get_close_matches(str(k), list(SETTINGS), n=1)
            sec = "training" if k in (d.get("training") or {}) else "settings"
            raise OptkgError(f"{at(sec, k)}: unknown training setting '{k}'" +
                             (f"; did you mean '{near[0]}'?" if near else ""))
        sec = "training" if k in (d.get("training") or {}) else "settings"
        job.set(k, v, f"{at(sec, k)}: {sec}.{k}")
    hw = d.get("hardware") or {}
    if not isinstance(hw, dict):
        raise OptkgError(f"{at('hardware')}: `hardware:` must be a mapping")
    if hw.get("gpu"):
        job.hardware = catalog.resolve_hardware(str(hw["gpu"]))
    if hw.get("count") is not None:
        job.set("world_size", hw["count"], f"{at('hardware', 'count')}: hardware.count")
    if hw.get("gpus_per_node") is not None:
        job.set("gpus_per_node", hw["gpus_per_node"], f"{at('hardware', 'gpus_per_node')}: hardware.gpus_per_node")
    derive_virtual_pipeline(job)
    return job


def load_training_stack(path: Path | str, catalog, resolver) -> TrainingJob:
    doc = load_yaml(path)
    if not is_training_stack(doc.data):
        raise OptkgError(f"{path}: not a training stack (no `framework:`)")
    return job_from_stack_doc(doc, str(path), catalog, resolver)


def _file_framework(p: Path):
    """(framework whose config ``p`` is, or None; the parsed YAML doc, or None for TOML). Raises OptkgError
    for unreadable YAML."""
    from kg.frameworks.registry import file_framework
    if p.suffix == ".toml":
        return file_framework(p, None), None
    doc = load_yaml(p, cache=True)  # the stack file `check` reads next: parsed once per content
    return file_framework(p, doc.data), doc


def load_training_file(path: Path | str, catalog, resolver, job: TrainingJob | None = None) -> TrainingJob:
    """Read a training file by its content: a framework's config (DeepSpeed JSON, accelerate YAML,
    torchtitan TOML: the framework packages claim them) or a stack YAML."""
    p = Path(path)
    if not p.exists():
        raise OptkgError(f"{p}: no such file")
    fw, doc = _file_framework(p)
    if fw is not None:
        return fw.read_file(p, job, resolver, doc)
    if doc is not None and is_training_stack(doc.data) and job is None:
        return job_from_stack_doc(doc, str(p), catalog, resolver)
    raise OptkgError(f"{p}: not a training config (expected a DeepSpeed JSON, an accelerate config, a torchtitan "
                     "TOML or a stack YAML with `framework:`)")


def training_file_kind(path: Path | str) -> str | None:
    """"a DeepSpeed config", "an accelerate config" or "a torchtitan TOML" for a training config file
    ``config_file:`` may name (by suffix and content, the framework's ``file_kind``), else None; never raises."""
    try:
        fw, _ = _file_framework(Path(path))
    except (OptkgError, OSError):
        return None
    return fw.file_kind if fw is not None else None


def _looks_like_model_config(path: Path) -> bool:
    try:
        from kg.core.yamlio import load_yaml
        data = load_yaml(path).data
    except (OptkgError, OSError):
        return False
    return isinstance(data, dict) and ("model_type" in data or "architectures" in data)


def is_training_file(path: Path | str) -> bool:
    """True when ``path`` holds a training config (by suffix and content), without raising."""
    try:
        fw, doc = _file_framework(Path(path))
    except (OptkgError, OSError):
        return False
    return fw is not None or (doc is not None and is_training_stack(doc.data))
