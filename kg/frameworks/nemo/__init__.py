"""NVIDIA NeMo: drives Megatron-core, so its jobs are sized with Megatron's accounting; a stack naming
NeMo with a ``command:`` is read by the Megatron reader."""
from __future__ import annotations

from kg.frameworks.megatron import Megatron


class NeMo(Megatron):
    id = "nemo"
    name = "NVIDIA NeMo"
    aliases = ("nemo-framework",)
    package = "nemo-toolkit"
    releases = ()


FRAMEWORKS = (NeMo(),)
