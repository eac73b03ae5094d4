"""One package per training framework (Megatron, DeepSpeed, torchtitan, FSDP, HF Trainer / accelerate,
verl, NeMo, TRL, OpenRLHF, Transformer Engine), each exporting ``FRAMEWORKS``: instances of
kg.frameworks.protocol.TrainingFramework. The generic training pipeline (kg.inputs.training,
kg.derive.training_memory, kg.analyses.training) asks a framework through the protocol and never
compares framework names; kg.frameworks.registry finds the packages (a new framework is one new
package plus its data, nothing to register by hand).

Importing this package imports nothing: the registry loads the packages on first use.
"""
