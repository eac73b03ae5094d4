"""NVIDIA NeMo: drives Megatron-core, so its Megatron jobs are sized with Megatron's accounting; a stack naming
NeMo with a ``command:`` is read by the Megatron reader. Its YAML configs (reader): NeMo-RL (policy on
Megatron-core -> this framework; on DTensor -> fsdp) and NeMo Automodel (FSDP2 -> fsdp)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.frameworks.megatron import Megatron


class NeMo(Megatron):
    id = "nemo"
    name = "NVIDIA NeMo"
    aliases = ("nemo-framework", "nemo-rl", "nemo-automodel", "automodel")
    package = "nemo-toolkit"
    releases = ()
    file_kind = "a NeMo-RL / NeMo Automodel config"

    def claims_file(self, path: Path, data: Any) -> bool:
        from kg.frameworks.nemo.reader import is_automodel_config, is_nemo_rl_config
        return is_nemo_rl_config(data) or is_automodel_config(data)

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.nemo.reader import is_nemo_rl_config, load_automodel, load_nemo_rl
        return (load_nemo_rl if is_nemo_rl_config(doc.data) else load_automodel)(Path(path), job, resolver)


    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        # NeMo builds megatron-core's configs (their __post_init__ checks run) but not Megatron-LM's argparse
        from kg.frameworks.megatron.generated import findings
        return findings(job, ("megatron-core",))


FRAMEWORKS = (NeMo(),)
