"""TensorRT-LLM's KV-cache memory per GPU (``trtllm-serve --kv_cache_free_gpu_memory_fraction`` /
``KvCacheConfig.free_gpu_memory_fraction``, default 0.9): the fraction is of the memory *free after* the profiling run,
not of the total. ``KvCacheCreator.configure_kv_cache_capacity`` measures ``peak_memory`` = torch peak (weights +
activations + the temporary estimation KV) + the memory outside torch (NCCL, CUDA graphs), and ``_cal_max_memory``
sizes the cache as ``(total_gpu_memory - peak_memory + allocated_bytes) x fraction`` (NVIDIA/TensorRT-LLM
``tensorrt_llm/_torch/pyexecutor/_util.py``, the PyTorch backend ``trtllm-serve`` runs by default; read in the
public repository, release not pinned: the 1.2.1 wheel's index is not reachable from here). So

    available_kv = (total - weights - activation peak - CUDA graphs - non-torch) x free_gpu_memory_fraction

and the weights must fit the whole device, not ``fraction x total``. The profile batch is
``max_num_tokens`` tokens (``BuildConfig.max_num_tokens``, default 8,192).
"""
from __future__ import annotations

from kg.derive.budget import (CUDA_GRAPH_BYTES, GIB, BudgetInputs, BudgetLine, ServingBudget, forward_peak_bytes,
                              non_torch_bytes, serving_budget_of)
from kg.inputs.modelcfg import ModelFacts


TRTLLM_SOURCE = ("TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory: (total_gpu_memory "
                 "- peak_memory + allocated_bytes) x fraction (public repository; release not pinned)")


def _trtllm_lines(total: float, fraction: float, utilization_source: str, weights: float, draft: float,
                  model: ModelFacts, tp_size: int, max_num_batched_tokens: int, enforce_eager: bool,
                  moe_tp_size: int | None, weights_source: str) -> tuple[list[BudgetLine], list[str]]:
    """TensorRT-LLM's lines (module doc): the device, what the profiling run holds, and the (1 - fraction)
    share of the remaining free memory it leaves unallocated, so that ``lines[0] - sum(rest)`` is the cache."""
    lines = [BudgetLine("device memory", total, f"total {total / GIB:.2f} GiB (torch.cuda.mem_get_info total)",
                        TRTLLM_SOURCE)]
    lines.append(BudgetLine("weights", weights, "estimated weights per GPU", weights_source))
    if draft:
        lines.append(BudgetLine("draft weights", draft, "speculative-decoding draft per GPU", "kg.derive.drafts"))
    fwd = forward_peak_bytes(model, tp_size, max_num_batched_tokens, moe_tp_size)
    lines.append(BudgetLine("activation peak", fwd, f"forward of max_num_tokens {max_num_batched_tokens:,} tokens "
                            "(optkg's vLLM-calibrated estimate; not calibrated on TensorRT-LLM logs)",
                            "kg.derive.budget; TensorRT-LLM KvCacheCreator profiling run", 0.15 * fwd + 0.25 * GIB))
    graphs = 0.0 if enforce_eager else CUDA_GRAPH_BYTES
    lines.append(BudgetLine("CUDA graphs", graphs, "estimate (vLLM logs); TensorRT-LLM counts them in the memory "
                            "outside torch", "kg.derive.budget", 0.25 * GIB if graphs else 0.0))
    nt, nt_err, nt_basis = non_torch_bytes(total, tp_size)
    lines.append(BudgetLine("non-torch", nt, nt_basis, "vLLM logs (PR 10511, issue 10517): TensorRT-LLM's not calibrated",
                            nt_err))
    free = max(0.0, total - sum(x.bytes for x in lines[1:]))
    lines.append(BudgetLine("held back", (1 - fraction) * free,
                            f"(1 - free_gpu_memory_fraction {fraction:g}) x {free / GIB:.2f} GiB free after the "
                            f"profiling run ({utilization_source})", TRTLLM_SOURCE))
    notes = [f"TensorRT-LLM applies free_gpu_memory_fraction {fraction:g} to the memory free after loading and "
             "profiling (weights, activations, NCCL and CUDA graphs), not to the device total as vLLM's "
             "gpu_memory_utilization"]
    return lines, notes


def budget(inp: BudgetInputs) -> ServingBudget:
    """TensorRT-LLM's budget lines for one GPU (module doc)."""
    lines, notes = _trtllm_lines(inp.total_memory_bytes, inp.gpu_memory_utilization, inp.utilization_source,
                                 inp.weight_bytes_per_gpu, inp.draft_weight_bytes, inp.model, inp.tp_size,
                                 inp.max_num_batched_tokens, inp.enforce_eager, inp.moe_tp_size, inp.weights_source)
    return serving_budget_of(inp, lines, notes)
