"""TensorRT-LLM (``trtllm-serve``, its LLM-API YAML): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/trtllm.yaml`` (click options of ``trtllm-serve serve`` and the LLM-API keys optkg models).
Modules: ``launch`` (the command with its ``--extra_llm_api_options`` / ``--config`` YAML, and an LLM-API YAML
read on its own).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, SpeedBackend


class TensorRTLLM(Engine):
    name = "trtllm"
    title = "TensorRT-LLM"

    def read_launch(self, launch: Any) -> Any:
        """The flags, then the LLM-API YAML the command names over them (kg.engines.trtllm.launch)."""
        from kg.engines.trtllm.launch import read_launch
        return read_launch(launch)

    def file_formats(self) -> list[Any]:
        """The LLM-API YAML on its own (``optkg check extra.yaml``)."""
        from kg.engines.trtllm.launch import LLM_API_FILE
        return [LLM_API_FILE]

    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``trtllm`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        TensorRT-LLM release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("trtllm", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'trtllm' (sdk/backends/trtllm_backend.py)")


ENGINE = TensorRTLLM()
