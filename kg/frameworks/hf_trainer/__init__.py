"""Hugging Face Trainer with accelerate: ``accelerate launch`` / Trainer script commands and accelerate
config files (reader: TrainingArguments flags, ``--fsdp``, ``--deepspeed ds.json``, accelerate's own
flags). A command that turns on FSDP or DeepSpeed becomes a job of that framework."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.frameworks.protocol import Release, TrainingFramework


class HFTrainer(TrainingFramework):
    id = "hf-trainer"
    name = "Hugging Face Transformers Trainer (with Accelerate)"
    aliases = ("transformers", "hf-transformers", "trainer", "accelerate", "hf")
    package = "transformers"
    releases = (Release("5.24.0", "transformers 5.24.0 wheel; accelerate 1.15.0 wheel"),)
    file_kind = "an accelerate config"
    # `accelerate launch` (accelerate's console script; `python -m accelerate.commands.launch` is the same)
    launchers = (("accelerate", "launch"),)
    launcher_modules = (("accelerate.commands.launch", "accelerate"),)

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        return 1  # any other launch runs a Trainer-style script: the fallback reader

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.hf_trainer.reader import parse_hf_command
        return parse_hf_command(text, model, where, base_dir, resolver)

    def claims_file(self, path: Path, data: Any) -> bool:
        return isinstance(data, dict) and "distributed_type" in data

    def config_checks(self, job: Any) -> list[dict[str, Any]]:
        # TrainingArguments' own checks (transformers 5.24.0) on the script's flags; a TRL GRPO job runs GRPOConfig,
        # whose generated rows already include them (kg/frameworks/trl)
        from kg.frameworks.hf_trainer import dsmatch
        out = unknown_accelerate_keys(job) + dsmatch.findings(job)
        if job.get("trainer") == "grpo":
            return out
        from kg.frameworks.hf_trainer.generated import findings
        return out + findings(job)

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.hf_trainer.reader import apply_accelerate_config
        from kg.inputs.training.job import TrainingJob
        job = job or TrainingJob(framework=self.id, source=str(path), name=Path(path).name)
        apply_accelerate_config(job, doc.data, str(path), doc.where, Path(path).parent)
        return job




def unknown_accelerate_keys(job: Any) -> list[dict[str, Any]]:
    """The accelerate config keys accelerate 1.15.0 refuses (kg.frameworks.hf_trainer.reader._unknown_accelerate_keys)."""
    from kg.frameworks.checkrows import unknown_keys_finding
    return unknown_keys_finding(
        job.configs.get("accelerate_unknown_keys") or [], "a key of an accelerate config",
        rule_id="accelerate-config-unknown-key", package="accelerate", release="1.15.0",
        path="accelerate/commands/config/config_args.py", line=154,
        values="ValueError: The config file at ... had unknown keys ([...])",
        expr="a top-level key that is no field of ClusterConfig / SageMakerConfig",
        url="https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/commands/config/config_args.py#L154-L159",
        table="kg/frameworks/hf_trainer/data/accelerate-config-keys-1.15.0.yaml")

FRAMEWORKS = (HFTrainer(),)
