"""Hugging Face TRL: SFT / DPO / GRPO trainers on transformers + accelerate. Their commands and recipe YAML are
read by kg.frameworks.hf_trainer (a TRL trainer script makes the job a TRL job); sharding is the accelerate /
DeepSpeed / FSDP setup the job carries, so memory terms follow DeepSpeed when a ZeRO stage is set."""
from __future__ import annotations

from typing import Any

from kg.frameworks.protocol import Release, TrainingFramework


class TRL(TrainingFramework):
    id = "trl"
    name = "Hugging Face TRL (SFT/DPO/GRPO trainers on transformers + accelerate)"
    aliases = ("huggingface-trl",)
    package = "trl"
    releases = (Release("0.14.0", "trl 0.14.0 wheel"), Release("0.15.2", "trl 0.15.2 wheel"),
                Release("0.17.0", "trl 0.17.0 wheel"), Release("0.18.0", "trl 0.18.0 wheel"),
                Release("1.16.0", "trl 1.16.0 wheel"))

    def implied_settings(self, job: Any, parallel) -> dict[str, Any]:
        """GRPO's generation batch as this TRL release computes it (the batch num_generations must divide):
        0.15-0.16 per-device x processes (grpo_trainer.py:343-344 at 0.15.2); 0.17 x gradient accumulation
        (grpo_trainer.py:597-598 at 0.17.0); from 0.18 x steps_per_generation, default the gradient accumulation
        (grpo_config.py:518-522 at 0.18.0; :1096-1098 at 1.16.0); 0.14 generates num_generations per prompt
        on every device (no such batch)."""
        from kg.core.relcmp import older_than
        if job.get("trainer") != "grpo" or not job.get("micro_batch_size"):
            return {}
        v = job.framework_version
        if older_than(v, "0.15.0"):
            return {}
        per_step = job.get("micro_batch_size") * parallel["world_size"]
        if older_than(v, "0.17.0"):
            return {"grpo_generation_batch": per_step, "grpo_batch_formula": "per_device_train_batch_size x processes"}
        steps = job.get("gradient_accumulation_steps") or 1
        if not older_than(v, "0.18.0") and job.get("steps_per_generation"):
            steps = job.get("steps_per_generation")
        return {"grpo_generation_batch": per_step * steps,
                "grpo_batch_formula": "per_device_train_batch_size x processes x "
                                      + ("gradient_accumulation_steps" if older_than(v, "0.18.0")
                                         else "steps_per_generation (default gradient_accumulation_steps)")}

    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        """GRPOConfig.__post_init__ (trl 1.16.0, with TrainingArguments' own checks through super()) on a GRPO job's
        flags; other releases' configs are not generated."""
        from kg.core.relcmp import older_than
        if job.get("trainer") != "grpo" or (job.framework_version and (older_than(job.framework_version, "1.16.0")
                                                                       or older_than("1.16.0", job.framework_version))):
            return []
        from pathlib import Path

        from kg.frameworks.hf_trainer.generated import findings_for
        here = Path(__file__).parent
        return findings_for(job, here / "checks" / "trl-1.16.0.yaml", here / "data" / "grpo-config-1.16.0.yaml")

    def _sharder(self, job: Any) -> TrainingFramework:
        from kg.frameworks.registry import get
        return get("deepspeed") if job.get("zero_stage") else TrainingFramework()

    def cross_checks(self, job, memory, shape, parallel) -> dict[str, Any]:
        return self._sharder(job).cross_checks(job, memory, shape, parallel)


FRAMEWORKS = (TRL(),)
