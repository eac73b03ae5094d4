"""DeepSpeed: ``ds_config.json`` and Megatron-DeepSpeed commands (reader), ZeRO stages and offload,
its PipelineEngine, and its own ZeRO-2/3 model-state estimators (memory)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.frameworks.protocol import Release, TrainingFramework


class DeepSpeed(TrainingFramework):
    id = "deepspeed"
    name = "DeepSpeed"
    aliases = ("deepspeed-ai", "microsoft-deepspeed")
    package = "deepspeed"
    # releases the training rules were read against (rules/training.yaml evidence)
    releases = (Release("0.14.0", "deepspeed 0.14.0 sdist"), Release("0.16.0", "deepspeed 0.16.0 sdist"),
                Release("0.19.8", "deepspeed 0.19.8 sdist"))
    file_kind = "a DeepSpeed config"
    keeps_reader_over_hint = True
    # the `deepspeed` program (setup.py scripts: bin/deepspeed -> deepspeed.launcher.runner.main)
    launchers = (("deepspeed", None),)

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        import re

        from kg.frameworks.megatron.reader import is_megatron_command
        # Megatron-DeepSpeed: Megatron's flags plus --deepspeed / --deepspeed_config (the HF Trainer reader
        # takes `deepspeed train.py --deepspeed ds.json` and reads the config itself)
        return 75 if is_megatron_command(args, script) and re.search(r"--deepspeed(_config)?\b", args) else 0

    def launcher_gpus(self, cmd: Any) -> None:
        """deepspeed 0.19.8 launcher/runner.py: without --num_gpus/--include/--hostfile the resource pool is
        ``localhost`` with every visible device (:467-472); --include host:ids runs those ids; a hostfile's
        slots (:446, fetch_hostfile :212) are not read, so the count is unknown unless --count gives it."""
        if "gpus_per_node" in cmd.launcher_args:
            return
        raw = cmd.launcher_raw
        cmd.ignored = [f for f in cmd.ignored if f not in ("--include", "-i", "--hostfile", "-H")]  # read here
        include = raw.get("--include") or raw.get("-i")
        if include:
            hosts = [h.split(":", 1) for h in include.split("@") if h]
            if hosts and all(len(h) == 2 and h[1] for h in hosts):
                cmd.launcher_args["world_size"] = str(sum(len(h[1].split(",")) for h in hosts))
                return
            cmd.gpus_unknown = f"deepspeed --include {include} names hosts without their GPU ids"
        elif raw.get("--hostfile") or raw.get("-H"):
            cmd.gpus_unknown = (f"deepspeed --hostfile {raw.get('--hostfile') or raw.get('-H')}: the GPUs are the "
                                "hostfile's slots (deepspeed 0.19.8 launcher/runner.py:446), which optkg does not read")
        else:
            cmd.node_gpus = ("deepspeed without --num_gpus/--include runs one process per GPU of the node "
                             "(deepspeed 0.19.8 launcher/runner.py:467-472)")

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.deepspeed.reader import parse_deepspeed_command
        return parse_deepspeed_command(text, model, where, base_dir)

    def claims_file(self, path: Path, data: Any) -> bool:
        from kg.frameworks.deepspeed.reader import looks_like_deepspeed_config
        return looks_like_deepspeed_config(data)

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.deepspeed.reader import apply_deepspeed_config, record_duplicate_keys
        from kg.inputs.training.job import TrainingJob
        job = job or TrainingJob(framework=self.id, source=str(path), name=Path(path).name)
        apply_deepspeed_config(job, doc.data, str(path), doc.where)
        record_duplicate_keys(job, path)
        return job

    def implied_settings(self, job: Any, parallel) -> dict[str, Any]:
        # DeepSpeed's pipeline parallelism is its PipelineEngine (runtime/pipe/engine.py)
        return {"pipeline_engine": True} if parallel["pp_size"] > 1 else {}

    def wording(self) -> dict[str, str]:
        return {"params": "parameters: the first pipeline stage's layers + embedding, /TP (Megatron-DeepSpeed), before "
                          "ZeRO partitioning",
                "schedule": "DeepSpeed PipelineEngine TrainSchedule", "schedule_interleaved": "DeepSpeed TrainSchedule"}

    def gathered_unit_params(self, counts: Any, shape) -> int:
        # ZeRO-3 gathers one module's parameters at a time: DeepSpeed's own largest module (model_to_params)
        from kg.frameworks.deepspeed.memory import largest_module_params
        return largest_module_params(shape, counts.embedding // shape["hidden_size"])

    def config_checks(self, job: Any) -> list[dict[str, Any]]:
        from kg.frameworks.deepspeed import keys
        from kg.frameworks.deepspeed.generated import findings
        return findings(job) + keys.findings(job)

    def cross_checks(self, job, memory, shape, parallel) -> dict[str, Any]:
        zs = job.get("zero_stage") or 0
        if zs in (2, 3) and parallel["tp_size"] == 1 and parallel["pp_size"] == 1:
            from kg.frameworks.deepspeed.memory import estimator_cross_check
            return {"deepspeed_estimator": estimator_cross_check(job, memory, zs, parallel)}
        return {}


FRAMEWORKS = (DeepSpeed(),)
