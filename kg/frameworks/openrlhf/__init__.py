"""OpenRLHF: ``openrlhf.cli.train_*`` commands, read by the HF Trainer reader's OpenRLHF flags
(``--zero_stage``, ``--micro_train_batch_size``, ``--adam_offload`` ...); it drives DeepSpeed."""
from __future__ import annotations

from typing import Any

from kg.frameworks.protocol import TrainingFramework


class OpenRLHF(TrainingFramework):
    id = "openrlhf"
    name = "OpenRLHF (Ray + DeepSpeed RLHF)"
    aliases = ("open-rlhf",)
    package = "openrlhf"

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        return 85 if "openrlhf" in script else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.hf_trainer.reader import parse_hf_command
        return parse_hf_command(text, model, where, base_dir, resolver)


FRAMEWORKS = (OpenRLHF(),)
