"""Hugging Face TRL: SFT / DPO / GRPO trainers on transformers + accelerate (their commands are read by
kg.frameworks.hf_trainer)."""
from __future__ import annotations

from kg.frameworks.protocol import Release, TrainingFramework


class TRL(TrainingFramework):
    id = "trl"
    name = "Hugging Face TRL (SFT/DPO/GRPO trainers on transformers + accelerate)"
    aliases = ("huggingface-trl",)
    package = "trl"
    releases = (Release("1.16.0", "trl 1.16.0 wheel"),)


FRAMEWORKS = (TRL(),)
