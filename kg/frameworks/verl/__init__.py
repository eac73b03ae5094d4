"""verl: ``python -m verl.trainer.main_ppo key=value ...`` (reader: Hydra overrides of the actor); it
drives Megatron-core or FSDP (``actor_rollout_ref.actor.strategy``)."""
from __future__ import annotations

from typing import Any

from kg.frameworks.protocol import TrainingFramework


class Verl(TrainingFramework):
    id = "verl"
    name = "verl (Volcano Engine RL for LLMs; drives Megatron-core or FSDP)"
    aliases = ("volcengine-verl",)
    package = "verl"
    command_reader = "megatron"
    keeps_reader_over_hint = True

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        return 100 if "verl.trainer" in script else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.verl.reader import parse_verl_command
        return parse_verl_command(text, model, where, resolver)

    def cross_checks(self, job, memory, shape, parallel) -> dict[str, Any]:
        from kg.frameworks.megatron.memory import theoretical_cross_check
        return {"megatron_theoretical": theoretical_cross_check(job, shape, parallel)}


FRAMEWORKS = (Verl(),)
