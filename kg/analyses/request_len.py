"""Max concurrency at the request length people serve (``--request-len``, or ``--isl`` + ``--osl``), beside the
figure at ``max_model_len``: a 128k engine serving 32k requests holds about four times the requests.

The same accounting as the max_model_len figure, at another length: vLLM V1's per-layer plan (its blocks per
request at that length, ``KVPlan.request_blocks``; vllm 0.33.0 ``get_max_concurrency_for_kv_cache_config`` divides
the pool's blocks by one request's), SGLang's token pool (tokens / length, capped by its max running requests), an engine's whole blocks
(``kv_blocks_for_requests``: TensorRT-LLM, LMDeploy),
else the budget over one sequence's bytes (``kg.derive.kv.sequence_bytes_per_gpu``: sliding layers capped at their
window, DCP-sharded). Data-parallel totals multiply as the max_model_len figure does.
"""
from __future__ import annotations

from typing import Any

from kg.derive.kv import sequence_bytes_per_gpu


def concurrency_at(request_len: int, derived: dict[str, Any], plan: Any, layout: Any, budget: float,
                   token_pool: bool) -> float | None:
    """Requests of ``request_len`` tokens that fit at once on one engine (2 decimals), or None."""
    if request_len < 1:
        return None
    if plan is not None:
        blocks = plan.request_blocks(request_len)
        return round(derived.get("kv_num_blocks", 0) / blocks, 2) if blocks else None
    if token_pool:  # SGLang: one token per slot; the scheduler runs at most max_running_requests
        tokens = derived.get("kv_tokens_per_gpu") or 0
        cap = derived.get("max_running_requests")
        conc = tokens / request_len
        return round(min(conc, cap) if cap else conc, 2)
    if derived.get("kv_blocks_for_requests") is not None and derived.get("kv_block_size"):
        # an engine that counts whole blocks of its own pool (TensorRT-LLM, LMDeploy): blocks / one request's
        return round(derived["kv_blocks_for_requests"] / -(-request_len // int(derived["kv_block_size"])), 2)
    per_req = sequence_bytes_per_gpu(layout, request_len)
    return round(budget / per_req, 2) if per_req else None


def add_request_len_facts(derived: dict[str, Any], request_len: int | None, plan: Any, layout: Any, budget: float,
                          token_pool: bool, dp_factor: int = 1) -> None:
    """``derived["max_concurrency_request_len"]`` and ``derived["max_concurrency_at_request_len"]`` (x ``dp_factor`` when the
    max_model_len figure counts every DP scheduler)."""
    if not request_len:
        return
    conc = concurrency_at(int(request_len), derived, plan, layout, budget, token_pool)
    if conc is None:
        return
    derived["max_concurrency_request_len"] = int(request_len)  # the length it is at (report keys: kv_/max_ prefixes)
    derived["max_concurrency_at_request_len"] = round(conc * dp_factor, 2)
