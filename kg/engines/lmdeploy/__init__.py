"""LMDeploy (``lmdeploy serve api_server <model> ...``): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/lmdeploy.yaml`` (lmdeploy 0.18.0 ``lmdeploy/cli/serve.py`` and ``lmdeploy/cli/utils.py``):
flags and defaults; ``--quant-policy`` 0/4/8/16/17 (or none/int4/int8/fp8/fp8_e5m2) becomes the stack's
``kv_cache_dtype``; ``turbomind_architectures`` says which backend runs a model. Its commands are read by the flag
table alone (the protocol's default ``read_launch``). Modules: ``budget`` (``--cache-max-entry-count`` as a fraction
of the memory free after the weights are loaded, per backend).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine

# lmdeploy 0.18.0 lmdeploy/utils.py:404-421 get_max_batch_size: max_batch_size by the CUDA device's name, else 128
MAX_BATCH_SIZE = {"a100": 384, "a800": 384, "h100": 1024, "h800": 1024, "l20y": 1024, "h200": 1024}
DEFAULT_MAX_BATCH_SIZE = 128


class LMDeploy(Engine):
    name = "lmdeploy"
    decode_context_parallel = False
    keeps_null_block = False
    title = "LMDeploy"
    fraction_given_source = ("given (--cache-max-entry-count): a fraction of the memory free after the weights are "
                             "loaded")
    fraction_table_source = ("lmdeploy default cache_max_entry_count 0.8 (lmdeploy 0.18.0 lmdeploy/messages.py:398), "
                             "a fraction of the memory free after the weights are loaded")

    def backend(self, stack: Any, ns: dict[str, Any]) -> str | None:
        """``--backend pytorch``, else TurboMind when it supports the model's architecture, else the PyTorch engine
        (lmdeploy 0.18.0 lmdeploy/cli/serve.py:233-240, lmdeploy/archs.py:31-42)."""
        given = str(ns.get("lmdeploy_backend") or "").lower()
        if given == "pytorch":
            return "pytorch"
        from kg.inputs.stack import _engine_tables
        archs = set(((_engine_tables().get(self.name) or {}).get("turbomind_architectures") or {}).get("names") or [])
        m = stack.model
        return "turbomind" if m is not None and m.architecture in archs else "pytorch"

    def default_max_num_batched_tokens(self, hardware: dict[str, Any]) -> int:
        """``max_prefill_token_num`` 8,192 (lmdeploy 0.18.0 lmdeploy/messages.py:411, :562)."""
        return 8192

    def default_max_num_seqs(self, hardware: dict[str, Any], max_num_batched_tokens: int) -> int:
        """``max_batch_size`` by the GPU's name (lmdeploy 0.18.0 lmdeploy/utils.py:404-421): 1,024 on H100 / H800 /
        H200 / L20Y, 384 on A100 / A800, else 128."""
        name = f"{hardware.get('id', '')} {hardware.get('name', '')}".lower()
        return next((n for key, n in MAX_BATCH_SIZE.items() if key in name), DEFAULT_MAX_BATCH_SIZE)

    def weight_share_bytes(self, total_memory_bytes: float, fraction: float) -> float:
        """The whole device: the fraction is of the memory left after loading (kg.engines.lmdeploy.budget)."""
        return float(total_memory_bytes)

    def budget(self, inp: Any) -> Any:
        from kg.engines.lmdeploy.budget import budget
        return budget(inp, inp.backend or "pytorch", inp.kv_bytes_per_block)


ENGINE = LMDeploy()
