"""LLaMA-Factory: its training YAML (``llamafactory-cli train examples/train_full/*.yaml``; keys of
src/llamafactory/hparams: ``stage``, ``finetuning_type``, ``cutoff_len``, ``quantization_bit``, ``deepspeed``
plus TrainingArguments), read by the HF Trainer reader it runs on; the job becomes DeepSpeed / FSDP / HF
Trainer as the Trainer would run it."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from kg.frameworks.protocol import TrainingFramework

KEYS = ("stage", "finetuning_type")


class LlamaFactory(TrainingFramework):
    id = "llama-factory"
    name = "LLaMA-Factory (fine-tuning on the HF Trainer)"
    aliases = ("llamafactory", "llama_factory")
    package = "llamafactory"
    file_kind = "a LLaMA-Factory config"

    def claims_file(self, path: Path, data: Any) -> bool:
        return isinstance(data, dict) and all(k in data for k in KEYS) and "model_name_or_path" in data

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.hf_trainer.reader import parse_hf_command
        read = parse_hf_command(f"llamafactory-cli train {shlex.quote(str(path))}", job.model if job else None,
                                str(path), Path("."), resolver)
        read.notes.append(f"LLaMA-Factory config {Path(path).name} (stage {read.get('trainer')}), run on the HF "
                          f"Trainer as {read.framework}")
        if job is None:
            return read
        job.settings.update(read.settings)
        job.model = job.model or read.model
        job.notes += read.notes
        return job


FRAMEWORKS = (LlamaFactory(),)
