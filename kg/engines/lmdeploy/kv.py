"""LMDeploy's KV pool in blocks and tokens, from the budget of kg.engines.lmdeploy.budget (``--cache-max-entry-count``
of the memory free after loading). No vLLM plan: LMDeploy cuts the budget into blocks of ``--cache-block-seq-len``
tokens (default 64, lmdeploy 0.18.0 ``lmdeploy/cli/utils.py:571-573``, ``lmdeploy/messages.py:400``), every layer
holding every block.

PyTorch engine (lmdeploy 0.18.0, read from the wheel):

- blocks: ``num_gpu_blocks = available_mem // total_cache_block_size`` (``pytorch/engine/executor/base.py:190``),
  ``available_mem = int(free_mem x cache_max_entry_count)`` (``:401``), the least over the ranks (``:196-207``);
- a block's bytes: one packed pool ``(num_layers, num_blocks, sum of the specs' aligned sizes)``
  (``pytorch/engine/cache_engine/layout.py:62-63``), each spec rounded up to 256 bytes
  (``cache_engine/schema.py:27-42``): the K and V blocks ``(block, kv_heads / tp, head_dim)`` in the cache dtype
  (``schema.py:58-103``) and, for ``--quant-policy 8``, a scale and a zero per head and token for K and for V in the
  model's dtype (``schema.py:138-155``);
- one block is reserved "for dummy input and padding" (``num_reserved_gpu_blocks=1``,
  ``pytorch/engine/config_builder.py:91-92``): requests share ``num_gpu_blocks - 1`` blocks, and the longest session
  is ``(num_gpu_blocks - 1) x block - block`` tokens (``pytorch/engine/engine.py:328-341``).

TurboMind: ``free x ratio / block_size`` blocks (kg.engines.lmdeploy.budget, BlockManager.cc at InternLM/lmdeploy@0bb835a,
C++ not in the wheel, release not pinned); a block is taken as the per-token K/V bytes x ``cache_block_seq_len``, which
holds for a 16-bit or fp8 cache. Not evaluable (a number would be a guess): TurboMind with ``--quant-policy`` 4 / 8
(its scale layout is C++), ``--quant-policy 4`` / turbo_quant on either engine (packed sub-byte layouts),
Mamba / linear-attention hybrids (state caches reserved before the blocks, ``base.py:_reserve_state_cache_mem``, not in
the budget), encoder-decoder models, and TP over the KV heads (the PyTorch engine asserts
``num_heads % world_size == 0``, ``schema.py:68``).
"""
from __future__ import annotations

import math
from typing import Any

from kg.derive.kv import KVCapacity

ALIGN = 256  # cache_engine/schema.py:37 CacheDesc.alignment
RESERVED_BLOCKS = 1  # pytorch/engine/config_builder.py:92
SOURCE = ("lmdeploy 0.18.0 pytorch/engine/executor/base.py:190, 401 (available_mem // block bytes); "
          "cache_engine/layout.py:62-63, schema.py:27-42 (256-byte aligned K/V specs per layer); "
          "config_builder.py:92 (one block reserved)")
TURBOMIND_SOURCE = ("InternLM/lmdeploy@0bb835a src/turbomind/models/llama/BlockManager.cc:101-105 (free x ratio / "
                    "block_size; public repository, release not pinned); block = K/V bytes per token x "
                    "cache_block_seq_len (lmdeploy 0.18.0 lmdeploy/messages.py:400)")


def not_evaluable(model: Any, tp: int, backend: str, kv_cache_dtype: str) -> str | None:
    """Why LMDeploy's pool cannot be sized here (module doc), or None."""
    kinds = set(getattr(model, "layer_kinds", None) or [])
    if getattr(model, "is_encoder_decoder", False):
        return "LMDeploy's cache for an encoder-decoder model"
    if kinds & {"linear", "mamba"}:
        return "LMDeploy's Mamba / linear-attention state caches, reserved before the KV blocks (hybrid model)"
    dtype = str(kv_cache_dtype or "auto").lower()
    if dtype in ("int4", "turbo_quant"):
        return f"LMDeploy's packed {dtype} KV block layout (--quant-policy)"
    if dtype == "int8" and backend == "turbomind":
        return "TurboMind's int8 KV block layout with its scales (C++, not in the wheel)"
    if dtype == "int8" and getattr(model, "is_mla", False):
        return "LMDeploy's int8 MLA block layout"
    heads = int(getattr(model, "num_key_value_heads", 0) or 0)
    if not getattr(model, "is_mla", False) and heads and tp > heads:
        return f"LMDeploy's KV heads per rank at TP {tp} over {heads} KV heads (it asserts num_heads % tp == 0)"
    return None


def _aligned(nbytes: float) -> int:
    return int(math.ceil(nbytes / ALIGN) * ALIGN)


def block_bytes(layout: Any, model: Any, block: int, kv_cache_dtype: str) -> int:
    """Bytes of one block over the rank's layers (module doc): each layer's K and V block rounded up to 256 bytes,
    plus, for int8, the K and V scale/zero blocks in the model's dtype."""
    layers = int(layout.layers_per_rank)
    if not layers:
        return 0
    per_layer = layout.bytes_per_token_per_gpu / layers * block  # K and V of one layer
    if getattr(model, "is_mla", False):
        total = _aligned(per_layer)  # K only (kv_lora_rank + rope), V of width 0 (schema.py:72, :95)
    else:
        total = 2 * _aligned(per_layer / 2)
    if str(kv_cache_dtype).lower() == "int8":
        scale = block * int(layout.kv_heads_per_rank) * 2 * int(getattr(model, "dtype_bytes", 2) or 2)
        total += 2 * _aligned(scale)
    return layers * total


def pool(budget: float, nbytes: int, block: int, max_model_len: int | None, backend: str,
         derived: dict[str, Any] | None = None) -> KVCapacity:
    """LMDeploy's pool on one GPU: ``budget // block bytes`` blocks (tokens: blocks x block), the requests of
    ``max_model_len`` tokens its free blocks hold, and the longest session (module doc). ``derived`` (check's facts)
    gets ``kv_num_blocks``, ``kv_blocks_for_requests``, ``kv_bytes_per_block`` and ``kv_capacity_source``."""
    blocks = int(float(budget) // nbytes) if nbytes else 0
    usable = max(0, blocks - RESERVED_BLOCKS) if backend == "pytorch" else blocks
    longest = max(0, usable * block - block) if backend == "pytorch" else usable * block
    conc = round(usable / math.ceil(max_model_len / block), 2) if max_model_len else None
    if derived is not None:
        derived.update(kv_num_blocks=blocks, kv_blocks_for_requests=usable, kv_bytes_per_block=nbytes,
                       kv_capacity_source=SOURCE if backend == "pytorch" else TURBOMIND_SOURCE)
    return KVCapacity(budget, block, blocks * block, blocks * block, max_model_len, conc, longest)
