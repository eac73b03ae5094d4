"""SGLang (``python -m sglang.launch_server``, ``sglang serve``): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/sglang.yaml`` (flags, programs, defaults from ``python/sglang/srt/server_args.py``),
``catalog/engines/releases/sglang.yaml``, ``catalog/engines/options/sglang.yaml``,
``catalog/engines/checks/sglang-*.yaml`` and ``catalog/support/sglang-*.yaml``. Modules: ``launch``
(``--config FILE`` expansion).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, SpeedBackend


class SGLang(Engine):
    name = "sglang"
    title = "SGLang"

    def launch_words(self, launch: Any) -> list[str]:
        """The arguments with a ``--config FILE`` expanded before them (kg.engines.sglang.launch)."""
        from kg.engines.sglang.launch import expand_config
        return expand_config(list(launch.args), launch)

    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``sglang`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        SGLang release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("sglang", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'sglang' (sdk/backends/sglang_backend.py)")


ENGINE = SGLang()
