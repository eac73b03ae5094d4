"""DeepSpeed configs (the ``ds_config.json`` passed with ``--deepspeed``/``--deepspeed_config``) and the
``deepspeed`` launcher command.

Keys read (DeepSpeed 0.19.8 ``deepspeed/runtime/config.py`` / ``zero/config.py`` /
``zero/offload_config.py``): ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
``gradient_accumulation_steps``, ``zero_optimization.stage``,
``zero_optimization.offload_optimizer.device`` / ``offload_param.device`` (``cpu``, ``nvme``,
``none``; the legacy ``cpu_offload: true`` means optimizer offload to cpu), ``bf16.enabled``,
``fp16.enabled``, ``optimizer.type``, ``pipeline`` (PipelineEngine settings). The HF integration's
``"auto"`` values are left unset (the Trainer fills them from its own flags). The launcher's
``--num_gpus`` × ``--num_nodes`` gives the world size; Megatron-DeepSpeed scripts
(``pretrain_gpt.py --deepspeed``) add the Megatron flags and run DeepSpeed's pipeline engine
when ``--pipeline-model-parallel-size`` > 1 (unless ``--no-pipeline-parallel``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml, parse_yaml
from kg.inputs.modelcfg import ModelFacts
from kg.inputs.training.argv import split_command
from kg.inputs.training.job import TrainingJob

CONFIG_FLAGS = ("--deepspeed_config", "--deepspeed-config", "--deepspeed")
OPTIMIZERS = {"adam": "adam", "adamw": "adamw", "fusedadam": "adam", "onebitadam": "adam", "zerooneadam": "adam",
              "onebitlamb": "adam", "lamb": "adam", "sgd": "sgd", "lion": "lion", "adagrad": "adam", "muon": "muon",
              "cpuadam": "adam", "deepspeedcpuadam": "adam"}


def looks_like_deepspeed_config(data: Any) -> bool:
    return isinstance(data, dict) and any(k in data for k in ("zero_optimization", "train_batch_size",
                                                               "train_micro_batch_size_per_gpu"))


def apply_deepspeed_config(job: TrainingJob, data: Any, name: str, where=None) -> None:
    """Set ``job``'s settings from a parsed DeepSpeed config mapping. ``where(path) -> (line, col)``."""
    if not isinstance(data, dict):
        raise OptkgError(f"{name}: a DeepSpeed config must be a JSON object")
    job.configs["deepspeed"] = data

    def at(*path: str) -> str:
        if where is None:
            return f"{name}: {'.'.join(path)}"
        line, _ = where(tuple(path))
        return f"{name}:{line}: {'.'.join(path)}"

    def put(setting: str, value: Any, *path: str) -> None:
        if value is None or value == "auto":
            return
        job.set(setting, value, at(*path))

    put("global_batch_size", data.get("train_batch_size"), "train_batch_size")
    put("micro_batch_size", data.get("train_micro_batch_size_per_gpu"), "train_micro_batch_size_per_gpu")
    put("gradient_accumulation_steps", data.get("gradient_accumulation_steps"), "gradient_accumulation_steps")
    z = data.get("zero_optimization")
    if z is not None:
        if not isinstance(z, dict):
            raise OptkgError(f"{at('zero_optimization')} must be an object")
        st = z.get("stage", 0)
        if st != "auto":
            if isinstance(st, bool) or not isinstance(st, int) or st not in (0, 1, 2, 3):
                raise OptkgError(f"{at('zero_optimization', 'stage')} must be 0, 1, 2 or 3, found {st!r}")
            job.set("zero_stage", st, at("zero_optimization", "stage"))
        for key, setting in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_param")):
            o = z.get(key)
            if isinstance(o, dict) and o.get("device") not in (None, "auto"):
                put(setting, str(o["device"]).lower(), "zero_optimization", key, "device")
        if z.get("cpu_offload") is True:
            job.set("offload_optimizer", "cpu", at("zero_optimization", "cpu_offload"))
    for key, dt in (("bf16", "bf16"), ("fp16", "fp16")):
        sec = data.get(key)
        if isinstance(sec, dict) and sec.get("enabled") is True:
            job.set("params_dtype", dt, at(key, "enabled"))
    # the dtypes the JSON switches on as accelerate tests them (str(enabled).lower() == "true"; "auto" is not on),
    # for its check against the launch's mixed precision (kg.analyses.training)
    job.configs["ds_has_zero_section"] = "zero_optimization" in data
    job.configs["ds_dtypes_enabled"] = [k for k in ("bf16", "fp16") if isinstance(data.get(k), dict)
                                        and str(data[k].get("enabled", "False")).lower() == "true"]
    opt = data.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("type"), str):
        t = opt["type"].lower().replace("_", "")
        job.set("optimizer", t, at("optimizer", "type"))
        job.set("optimizer_source", "config", at("optimizer", "type"))
    if not isinstance(opt, dict) and "optimizer_source" not in job.settings:
        # no `optimizer` section: the script hands DeepSpeed its own optimizer (HF Trainer, Megatron-DeepSpeed)
        job.set("optimizer_source", "client", at("optimizer"))
    # zero_allow_untested_optimizer (runtime/config.py get_zero_allow_untested_optimizer): lets ZeRO take an optimizer
    # outside zero/utils.py:45-48 ZERO_SUPPORTED_OPTIMIZERS
    job.configs["ds_allow_untested_optimizer"] = data.get("zero_allow_untested_optimizer") is True
    # communication_data_type (runtime/config.py:217-230): None, or fp32 / fp16 / bf16 in any case
    cdt = data.get("communication_data_type")
    job.configs["ds_communication_data_type"] = "" if cdt is None else str(cdt)
    tpc = data.get("tensor_parallel")
    if isinstance(tpc, dict) and tpc.get("autotp_size") not in (None, "auto"):
        # AutoTP training (deepspeed >= 0.16.4, runtime/tensor_parallel/config.py): the TP size of the job
        put("autotp_size", tpc["autotp_size"], "tensor_parallel", "autotp_size")
        put("tp_size", tpc["autotp_size"], "tensor_parallel", "autotp_size")
    if "pipeline" in data:
        job.set("pipeline_engine", True, at("pipeline"))
        _pipeline_stages(job, data["pipeline"], at)
    from kg.frameworks.deepspeed.keys import check_keys
    job.configs["deepspeed_unknown_keys"] = check_keys(data, name, at, job.notes)


def record_duplicate_keys(job: TrainingJob, path: Path | str) -> None:
    """Record the keys the JSON file repeats (kg.frameworks.deepspeed.keys), with a note saying which value is read."""
    from kg.core.yamlio import read_text
    from kg.frameworks.deepspeed.keys import duplicate_keys
    dups = duplicate_keys(read_text(path))
    job.configs["deepspeed_duplicate_keys"] = [(k, lines, f"{path}:{lines[-1]}") for k, lines in dups]
    for k, lines in dups:
        job.notes.append(f"{path}:{lines[-1]}: duplicate key {k!r} (lines {', '.join(map(str, lines))}): deepspeed "
                         "refuses the file (\"Duplicate keys in DeepSpeed config\"); read through the HF Trainer / "
                         "accelerate (json.load) the last one wins, and this report reads the last one")


def _pipeline_stages(job: TrainingJob, pipe: Any, at) -> None:
    """The pipeline size of a config with a ``pipeline`` section.

    DeepSpeed does not take the stage count from the JSON: ``PipelineModule(num_stages=...)`` in the
    training script sets it (deepspeed 0.19.8 runtime/pipe/module.py:173, the engine reads it back from
    the module's grid, runtime/pipe/engine.py:108); ``get_pipeline_config`` parses ``stages`` (default
    ``"auto"``, runtime/config.py:275) and nothing reads it. So an integer ``pipeline.stages`` is taken as
    the PP the script passes, with a note saying so; without one (``"auto"`` or absent), and no
    ``--pipeline-model-parallel-size`` from the command, PP is unknown (``job.unknown``): the layout, the
    batch check and memory per GPU are then not evaluable instead of assuming PP 1.
    """
    if not isinstance(pipe, dict):
        raise OptkgError(f"{at('pipeline')} must be an object")
    stages = pipe.get("stages", "auto")
    where = at("pipeline", "stages") if "stages" in pipe else at("pipeline")
    if stages == "auto":
        if "pp_size" not in job.settings:
            job.unknown.add("pp_size")
            job.notes.append(f"{where}: the pipeline engine is in use, but DeepSpeed takes the number of stages from "
                             "PipelineModule(num_stages=...) in the training script (deepspeed 0.19.8 "
                             "runtime/pipe/module.py:173), not from this config: PP is unknown, so DP, the batch "
                             "check and memory per GPU are not evaluated (give \"pipeline\": {\"stages\": N})")
        return
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise OptkgError(f"{where} must be a positive integer or \"auto\", found {stages!r}")
    if "pp_size" in job.settings:
        if job.settings["pp_size"] != stages:
            job.notes.append(f"{where}: {stages} differs from the command's pipeline size {job.settings['pp_size']}; "
                             "DeepSpeed does not read this key (the script's PipelineModule(num_stages=...) decides), "
                             f"so PP {job.settings['pp_size']} is used")
        return
    job.set("pp_size", stages, where)
    job.notes.append(f"PP {stages} from {where}: DeepSpeed itself takes the stage count from "
                     "PipelineModule(num_stages=...) in the training script (deepspeed 0.19.8 runtime/pipe/module.py:173) "
                     "and does not read this key (runtime/config.py:275 only parses it); the check assumes the script "
                     "passes the same")


def load_deepspeed_config(path: Path | str, job: TrainingJob | None = None, model: ModelFacts | None = None) -> TrainingJob:
    """A TrainingJob from a DeepSpeed JSON file (errors name file:line and the key)."""
    doc = load_yaml(path)  # JSON is YAML; loaded safely, with line numbers
    job = job or TrainingJob(framework="deepspeed", model=model, source=str(path), name=Path(path).name)
    apply_deepspeed_config(job, doc.data, str(path), doc.where)
    record_duplicate_keys(job, path)
    return job


def parse_deepspeed_command(text: str, model: ModelFacts | None = None, where: str = "--cmd",
                            base_dir: Path | None = None) -> TrainingJob:
    """A TrainingJob from ``deepspeed --num_gpus N [--num_nodes M] script.py ... --deepspeed_config ds.json``.

    The config file is read relative to ``base_dir`` (default: the current folder); a Megatron-DeepSpeed
    script's Megatron flags are read too. Raises OptkgError when the named config does not exist.
    """
    from kg.frameworks.megatron.reader import parse_megatron_command
    cmd = split_command(text, where)
    job = parse_megatron_command(text, model, where, framework="deepspeed", base_dir=base_dir) if cmd.script else \
        TrainingJob(framework="deepspeed", model=model, source=where)
    engine = pipeline_engine_of(cmd)
    if engine:
        job.set("pipeline_engine", True, f"{where}: {engine}")
    args = cmd.args
    cfg = None
    for i, t in enumerate(args):
        name, eq, val = t.partition("=")
        if name in CONFIG_FLAGS:
            if eq:
                cfg = val
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                cfg = args[i + 1]
    if cfg:
        p = Path(cfg)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        if not p.exists():
            raise OptkgError(f"{where}: DeepSpeed config '{cfg}' not found")
        apply_deepspeed_config(job, load_yaml(p).data, str(p), load_yaml(p).where)
        record_duplicate_keys(job, p)
        job.configs["deepspeed_direct"] = True  # the launched script hands this config to deepspeed.initialize
    job.ignored = [x for x in job.ignored if x not in CONFIG_FLAGS + ("--no-pipeline-parallel",)]
    return job


def pipeline_engine_of(cmd) -> str | None:
    """Why the script runs DeepSpeed's PipelineEngine (a PipelineModule model), or None when it does not.

    - DeepSpeedExamples' Megatron-LM-v1.1.5-3D_parallelism and GPT-NeoX: ``--pipe-parallel-size N`` builds
      GPT2ModelPipe when N > 0 (pretrain_gpt2.py:40-43 at DeepSpeedExamples@5c6b1c8f; default 0, arguments.py:380);
    - Megatron-DeepSpeed's ``pretrain_gpt.py`` builds GPTModelPipe under --deepspeed unless
      ``--no-pipeline-parallel``, even at PP 1 (Megatron-DeepSpeed#474 hit the ZeRO-3 assert with
      --pipeline-model-parallel-size 1);
    - other scripts (Megatron-LM-v1.1.5-ZeRO3's pretrain_gpt2.py, a plain ZeRO-3 job with model parallel 8 x data
      parallel 8 and no pipeline) build no PipelineModule.
    """
    args = cmd.args
    for i, t in enumerate(args):
        name, eq, val = t.partition("=")
        if name == "--pipe-parallel-size":
            val = val if eq else (args[i + 1] if i + 1 < len(args) else "0")
            return f"--pipe-parallel-size {val} (> 0 builds a PipelineModule)" if val.isascii() and val.isdigit() and int(val) > 0 else None
    script = (cmd.script or "").rsplit("/", 1)[-1]
    if script == "pretrain_gpt.py" and "--no-pipeline-parallel" not in args:
        return "Megatron-DeepSpeed pretrain_gpt.py without --no-pipeline-parallel (GPTModelPipe)"
    return None


def parse_deepspeed_text(text: str, name: str = "<ds_config>") -> TrainingJob:
    """A TrainingJob from DeepSpeed JSON text (tests and pasted configs)."""
    doc = parse_yaml(text, name)
    job = TrainingJob(framework="deepspeed", source=name, name=name)
    apply_deepspeed_config(job, doc.data, name, doc.where)
    return job
