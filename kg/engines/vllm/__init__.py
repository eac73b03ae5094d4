"""vLLM (``vllm serve``, the OpenAI api_server module): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/vllm.yaml`` (flags, programs, defaults; each entry cites ``vllm/engine/arg_utils.py``),
``catalog/engines/releases/vllm.yaml`` (releases and per-release defaults), ``catalog/engines/options/vllm.yaml``,
``catalog/engines/values/vllm-quantization.yaml``, ``catalog/engines/checks/vllm-*.yaml`` and
``catalog/support/vllm-*.yaml``. Modules: ``launch`` (``--config FILE`` expansion).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, SpeedBackend


class VLLM(Engine):
    name = "vllm"
    title = "vLLM"

    def launch_words(self, launch: Any) -> list[str]:
        """The arguments with a ``--config FILE`` expanded after the positional model (kg.engines.vllm.launch)."""
        from kg.engines.vllm.launch import expand_config
        return expand_config(list(launch.args), launch)

    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``vllm`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        vLLM release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("vllm", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'vllm' (sdk/backends/vllm_backend.py)")


ENGINE = VLLM()
