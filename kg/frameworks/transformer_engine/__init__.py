"""NVIDIA Transformer Engine: the FP8 layers Megatron, NeMo and accelerate use (no launcher of its own)."""
from __future__ import annotations

from kg.frameworks.protocol import TrainingFramework


class TransformerEngine(TrainingFramework):
    id = "transformer-engine"
    name = "NVIDIA Transformer Engine"
    aliases = ("te", "transformerengine")
    package = "transformer-engine"


FRAMEWORKS = (TransformerEngine(),)
