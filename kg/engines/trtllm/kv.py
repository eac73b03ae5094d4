"""TensorRT-LLM's KV pool in tokens (the PyTorch backend ``trtllm-serve`` runs by default), from the budget of
kg.engines.trtllm.budget (``free_gpu_memory_fraction`` of the memory free after loading and the estimation run).

TensorRT-LLM has no per-layer plan of vLLM's kind: ``KvCacheCreator.configure_kv_cache_capacity`` turns the memory
into ``max_tokens = int(kv_cache_max_memory // kv_size_per_token)`` (capped by a ``kv_cache_config.max_tokens`` the
user gives: ``min(memory, max_tokens x kv_size_per_token)``; optkg does not read that key, so a stack that gives it
or ``max_gpu_total_bytes`` is not evaluable), and the KV cache manager cuts it into blocks of
``tokens_per_block`` tokens (``KvCacheConfig.tokens_per_block``, default 32). Sources (NVIDIA/TensorRT-LLM, public
repository; the wheels cannot be fetched here: PyPI's tensorrt-llm 1.2.1 is a stub sdist, and the repository
snapshot is 2.5 GB, over the fetch limit; so no release is pinned, as for the budget):

- ``tokens_per_block: int = Field(default=32,`` ``tensorrt_llm/llmapi/llm_args.py:4288`` at 00043967 (the
  ``KvCacheConfig`` field; the line counted from the ``validate_free_gpu_memory_fraction`` raise at :4485 that
  catalog/engines/checks/sites/trtllm-0+commit.0004396.yaml records);
- ``self._kv_cache_config.max_tokens = (self._get_kv_size_per_token().tokens_for_budget(kv_cache_max_memory))``,
  ``tokens_for_budget``: ``max((budget - self.intercept) // self.slope, 0)`` with no intercept outside the Mamba
  hybrids: ``tensorrt_llm/_torch/pyexecutor/_util.py`` ``KvCacheCreator.configure_kv_cache_capacity`` and
  ``CacheCost`` at 00043967 (the same commit; the KVCacheManager path, V2 only for Gemma-4 hybrids and hybrid
  linear models unless ``use_kv_cache_manager_v2`` is set, ``_non_hybrid_kv_cache_manager_cls``);
- older text of the same file (the code index holds it beside 00043967's, commit not given) had
  ``int(kv_cache_max_memory // self._get_kv_size_per_token())``; ``KVCacheManager.calculate_max_num_blocks``
  (``resource_manager.py``) rounds the blocks up in older text (``math.ceil(max_tokens / tokens_per_block)``) and
  down in newer (``int(max_tokens // tokens_per_block)``, both as the code index holds them, commits not given).
  optkg counts whole blocks of the budget (floor): a release differs from it by at most one block.

So, per GPU: ``tokens = floor(budget / (bytes/token x tokens_per_block)) x tokens_per_block`` (bytes/token with
the draft's layers when a draft model runs, ``_get_kv_size_per_token``), and a request of ``max_seq_len`` tokens
holds ``ceil(max_seq_len / tokens_per_block)`` blocks (optkg's reading of the default GUARANTEED_NO_EVICT capacity
scheduler, which admits a request only when its blocks to the end fit).

Chunked local attention (Llama 4) is no window to the KV manager: ``LlamaAttention`` passes Llama 4's layers to
``Attention`` with no window or chunk (``tensorrt_llm/_torch/models/modeling_llama.py`` at 012cf909; newer text hands
``attention_chunk_size`` to the attention kernel only), and the pools' windows come from ``max_attention_window``
alone, so every layer keeps every token (vLLM's plan capped the chunked layers' blocks, counting more tokens).

Not evaluable (a number would be vLLM's or a guess): sliding-window layers (TensorRT-LLM keeps one pool per
attention-window size and splits the memory between them, the VSWA path, ``is_vswa`` in
``configure_kv_cache_capacity``), Mamba / linear-attention hybrids (a separate state manager), encoder-decoder
models (a cross-attention pool, ``cross_kv_cache_fraction``), sparse-attention (DSA) models
(their own managers, ``get_sparse_attn_kv_cache_manager``), MLA with an fp8 cache (00043967 reserves the fp8
context-MLA workspace, ``get_mla_context_workspace_reserve``, out of the pool when block reuse is on and chunked
prefill off; whether a release does is not read), and TP over the model's KV heads (``get_cache_size_per_token``
estimates ``head_dim x num_kv_heads // tp_size`` per layer, fractional heads, in every text the index holds, while the
pools hold ``(num_kv_heads + tp_size - 1) // tp_size`` whole heads, ``num_kv_heads_per_layer``,
``resource_manager.py`` at 001541ba: which one bounds the pool is decided in C++ not read here).
"""
from __future__ import annotations

import math
from typing import Any

from kg.derive.kv import KVCapacity

TOKENS_PER_BLOCK_SOURCE = ("NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py:4288 at 00043967 (KvCacheConfig."
                           "tokens_per_block default 32; release not pinned)")
POOL_SOURCE = ("NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator.configure_kv_cache_capacity at "
               "00043967: max_tokens = tokens_for_budget(memory), in blocks of tokens_per_block (release not pinned)")


def not_evaluable(model: Any, tp: int, kv_cache_dtype: str, block_reuse: bool = True,
                  chunked_prefill: bool | None = None) -> str | None:
    """Why TensorRT-LLM's pool cannot be sized here (module doc), or None. ``block_reuse`` / ``chunked_prefill``:
    the stack's ``kv_cache_config.enable_block_reuse`` and ``enable_chunked_prefill`` (None: not given)."""
    kinds = set(getattr(model, "layer_kinds", None) or [])
    if getattr(model, "is_encoder_decoder", False):
        return "TensorRT-LLM's cross-attention pool share (cross_kv_cache_fraction) for an encoder-decoder model"
    if kinds & {"linear", "mamba"}:
        return "TensorRT-LLM's Mamba / linear-attention state manager beside the KV pool (hybrid model)"
    if "sliding" in kinds:
        return ("how TensorRT-LLM splits the memory between its per-window pools (VSWA) for the model's "
                "sliding-window layers")
    if getattr(model, "index_head_dim", None):
        return "TensorRT-LLM's sparse-attention (DSA) KV manager and its indexer cache"
    # 00043967 reserves the workspace when block reuse can grow it past the profiled floor: reuse on, chunked
    # prefill off (get_mla_context_workspace_kv_len_cap); older text has no reserve
    if getattr(model, "is_mla", False) and str(kv_cache_dtype or "auto").lower().startswith(("fp8", "nvfp4")) \
            and block_reuse and chunked_prefill is not True:
        return ("whether the release reserves the fp8 context-MLA attention workspace out of the KV pool "
                "(get_mla_context_workspace_reserve at 00043967)")
    heads = int(getattr(model, "num_key_value_heads", 0) or 0)
    if not getattr(model, "is_mla", False) and heads and tp > heads:
        return (f"TensorRT-LLM's bytes per token at TP {tp} over {heads} KV heads (its estimate counts "
                f"head_dim x kv_heads // tp_size, its pools whole heads)")
    return None


def caps_given(stack: Any) -> str | None:
    """A pool size the LLM-API YAML gives that optkg does not read (``kv_cache_config.max_tokens`` /
    ``max_gpu_total_bytes`` cap the pool, module doc): the option as the stack kept it, else None."""
    for entry in getattr(stack, "ignored", None) or []:
        if str(entry).startswith(("kv_cache_config.max_tokens", "kv_cache_config.max_gpu_total_bytes")):
            return str(entry).split(" (")[0]
    return None


def pool(budget: float, bytes_per_token: float, tokens_per_block: int, max_seq_len: int | None,
         derived: dict[str, Any] | None = None) -> KVCapacity:
    """TensorRT-LLM's pool on one GPU (module doc): whole blocks of ``tokens_per_block`` in the budget, the requests
    of ``max_seq_len`` tokens it holds, and the longest request (the whole pool). ``derived`` (check's facts) gets
    ``kv_num_blocks``, ``kv_blocks_for_requests``, ``kv_bytes_per_block`` and ``kv_capacity_source``."""
    blocks = int(float(budget) // (bytes_per_token * tokens_per_block)) if bytes_per_token else 0
    tokens = blocks * tokens_per_block
    conc = round(blocks / math.ceil(max_seq_len / tokens_per_block), 2) if max_seq_len else None
    if derived is not None:
        derived.update(kv_num_blocks=blocks, kv_blocks_for_requests=blocks,
                       kv_bytes_per_block=round(bytes_per_token * tokens_per_block),
                       kv_capacity_source=f"{POOL_SOURCE}; {TOKENS_PER_BLOCK_SOURCE}")
    return KVCapacity(budget, tokens_per_block, tokens, tokens, max_seq_len, conc, tokens)
