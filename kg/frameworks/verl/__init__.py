"""verl: ``python -m verl.trainer.main_ppo key=value ...`` (reader: Hydra overrides of the actor); it
drives Megatron-core or FSDP (``actor_rollout_ref.actor.strategy``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.frameworks.protocol import Release, TrainingFramework


class Verl(TrainingFramework):
    id = "verl"
    name = "verl (Volcano Engine RL for LLMs; drives Megatron-core or FSDP)"
    aliases = ("volcengine-verl",)
    package = "verl"
    command_reader = "megatron"
    keeps_reader_over_hint = True
    file_kind = "a verl config"
    releases = (Release("0.3.0.post1", "verl 0.3.0.post1 wheel"), Release("0.4.0", "verl 0.4.0 wheel"),
                Release("0.9.1", "verl 0.9.1 wheel: verl/trainer/config/_generated_ppo_*trainer.yaml"))

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        return 100 if "verl.trainer" in script else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.verl.reader import parse_verl_command
        return parse_verl_command(text, model, where, resolver)

    def implied_settings(self, job: Any, parallel) -> dict[str, Any]:
        # verl's Megatron actor turns sequence parallelism off at TP 1 from 0.4.0 (workers/actor/megatron_actor.py:
        # 146-147 at 0.4.0; workers/config/engine.py:234-236 at 0.9.1); 0.3.0.post1 passes it on to Megatron-core
        from kg.core.relcmp import older_than
        if job.get("sequence_parallel") and parallel["tp_size"] <= 1 and not older_than(job.framework_version, "0.4.0"):
            return {"sequence_parallel": False}
        return {}

    def claims_file(self, path: Path, data: Any) -> bool:
        from kg.frameworks.verl.reader import is_verl_config
        return is_verl_config(data)

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.verl.reader import load_verl_config
        return load_verl_config(Path(path), job, resolver)

    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        """Hydra overrides of keys verl's struct config lacks (kg.frameworks.verl.reader.struct_misses)."""
        from kg.frameworks.checkrows import unknown_keys_finding
        return unknown_keys_finding(
            job.configs.get("verl_unknown_overrides") or [], "a key of verl's config",
            rule_id="verl-override-of-unknown-key", package="verl", release="0.9.1",
            path="verl/trainer/config/_generated_ppo_trainer.yaml", line=1, hint=" (a new key needs a leading +)",
            values="hydra: Could not override '<key>'. Key '<key>' is not in struct",
            expr="an override without + of a key the composed trainer config does not define",
            url="https://github.com/volcengine/verl/blob/v0.9.1/verl/trainer/config/_generated_ppo_trainer.yaml",
            table="kg/frameworks/verl/data/0.9.1/_generated_ppo_trainer.yaml")

    def cross_checks(self, job, memory, shape, parallel) -> dict[str, Any]:
        if job.get("fsdp_sharding"):
            return {}  # FSDP workers (actor strategy fsdp/fsdp2): Megatron-LM's estimator does not describe them
        from kg.frameworks.megatron.memory import theoretical_cross_check
        return {"megatron_theoretical": theoretical_cross_check(job, shape, parallel)}


FRAMEWORKS = (Verl(),)
