"""LMDeploy (``lmdeploy serve api_server <model> ...``): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/lmdeploy.yaml`` (lmdeploy 0.18.0 ``lmdeploy/cli/serve.py`` and ``lmdeploy/cli/utils.py``):
flags and defaults; ``--quant-policy`` 0/4/8/16/17 (or none/int4/int8/fp8/fp8_e5m2) becomes the stack's
``kv_cache_dtype``; catalog/support/lmdeploy-turbomind-archs.yaml says which backend runs a model. Its commands are
read by the flag table alone (the protocol's default ``read_launch``). Modules: ``budget`` (``--cache-max-entry-count``
as a fraction of the memory free after the weights are loaded, per backend, or TurboMind's block count), ``kv`` (that
memory in blocks of --cache-block-seq-len tokens, or not evaluable).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, NotEvaluable

# lmdeploy 0.18.0 lmdeploy/utils.py:404-421 get_max_batch_size: max_batch_size by the CUDA device's name, else 128
MAX_BATCH_SIZE = {"a100": 384, "a800": 384, "h100": 1024, "h800": 1024, "l20y": 1024, "h200": 1024}
DEFAULT_MAX_BATCH_SIZE = 128


class LMDeploy(Engine):
    name = "lmdeploy"
    decode_context_parallel = False
    keeps_null_block = False
    kv_command = False  # its pool is not vLLM's plan: `optkg kv` refuses it, check reports it (kv.py)
    title = "LMDeploy"
    fraction_given_source = ("given (--cache-max-entry-count): a fraction of the memory free after the weights are "
                             "loaded")
    fraction_table_source = ("lmdeploy default cache_max_entry_count 0.8 (lmdeploy 0.18.0 lmdeploy/messages.py:398), "
                             "a fraction of the memory free after the weights are loaded")

    def memory_fraction(self, stack: Any, ns: dict[str, Any]) -> tuple[float, str]:
        """The protocol's fraction and source; on TurboMind a value of 1 or more is a KV block count
        (kg.engines.lmdeploy.budget), said so in the source."""
        fraction, source = super().memory_fraction(stack, ns)
        if fraction >= 1 and self.backend(stack, ns) == "turbomind":
            source = (f"given (--cache-max-entry-count): {int(fraction):,} KV blocks (TurboMind reads 1 or more as a "
                      "block count from lmdeploy 0.10.0, lmdeploy/messages.py:267)")
        return fraction, source

    def engine_facts(self, stack: Any, ns: dict[str, Any], out: dict[str, Any]) -> None:
        """On TurboMind with ``--cache-max-entry-count`` of 1 or more (a block count, kg.engines.lmdeploy.budget):
        ``turbomind_cache_blocks`` asked for and ``turbomind_cache_blocks_that_fit``, the blocks of the stack's KV
        block size the memory free after loading holds (``held back`` + the cache, over the bytes of one block)."""
        fraction = ns.get("gpu_memory_utilization")
        budget = ns.get("kv_budget_bytes_per_gpu")
        held = next((x["bytes"] for x in ns.get("kv_budget_breakdown") or [] if x["name"] == "held back"), None)
        if fraction is None or float(fraction) < 1 or not budget or held is None:
            return
        if self.backend(stack, ns) != "turbomind":
            return
        count = int(fraction)
        out["turbomind_cache_blocks"] = count
        out["turbomind_cache_blocks_that_fit"] = int((held + budget) // (budget / count))

    def backend(self, stack: Any, ns: dict[str, Any]) -> str | None:
        """``--backend pytorch``, else TurboMind when the release's TurboMind supports the model's architecture
        (catalog/support/lmdeploy-turbomind-archs.yaml; a release between the ones read: the newest read), else the
        PyTorch engine (lmdeploy 0.18.0 lmdeploy/cli/serve.py:233-240, lmdeploy/archs.py:31-42)."""
        if str(ns.get("lmdeploy_backend") or "").lower() == "pytorch":
            return "pytorch"
        from kg.knowledge.support import support_facts
        arch = {"architecture": stack.model.architecture if stack.model is not None else None}
        supported = support_facts(self.name, stack.engine_version, arch).get("turbomind_supports_arch")
        if supported is None:
            supported = support_facts(self.name, None, arch).get("turbomind_supports_arch")
        return "turbomind" if supported else "pytorch"

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

    def kv_plan(self, stack: Any, ns: dict[str, Any], model: Any, tp: int, pp: int, dcp: int, kv_cache_dtype: str,
                max_model_len: int, max_num_batched_tokens: int, draft_layers: int = 0) -> Any:
        """None: LMDeploy cuts its budget into blocks of --cache-block-seq-len tokens (``capacity``), not by vLLM's
        per-layer plan."""
        return None

    def capacity(self, cap: Any, ctx: Any) -> Any:
        """LMDeploy's pool (kg.engines.lmdeploy.kv.pool) on the stack's backend, or ``NotEvaluable`` with the fact it
        lacks."""
        from kg.engines.lmdeploy.kv import block_bytes, not_evaluable, pool
        backend = self.backend(ctx.stack, ctx.ns) or "pytorch"
        reason = not_evaluable(ctx.model, ctx.attention_tp, backend, ctx.kv_cache_dtype)
        if reason:
            return NotEvaluable(reason)
        nbytes = block_bytes(ctx.layout, ctx.model, ctx.block_size, ctx.kv_cache_dtype)
        nbytes += int(float(ctx.derived.get("draft_kv_bytes_per_token_per_gpu") or 0) * ctx.block_size)
        return pool(ctx.budget, nbytes, ctx.block_size, ctx.derived.get("max_model_len_effective"), backend,
                    ctx.derived)

    def budget(self, inp: Any) -> Any:
        from kg.engines.lmdeploy.budget import budget
        return budget(inp, inp.backend or "pytorch", inp.kv_bytes_per_block)


ENGINE = LMDeploy()
