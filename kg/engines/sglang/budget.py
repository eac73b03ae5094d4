"""SGLang's KV-cache memory per GPU (``mem_fraction_static``): the static pool (weights + KV) is
``total x mem_fraction_static``; activations and CUDA graphs live in the remaining ``1 - mem_fraction_static``
(``model_executor/model_runner_components/kv_pool_runtime.py:58-110``: headroom
``pre_model_load_memory x (1 - mem_fraction_static)``), so only weights and non-torch memory come
out of the KV share. The default fraction is computed from the GPU (kg.engines.sglang.memfrac).
"""
from __future__ import annotations

from kg.derive.budget import GIB, BudgetInputs, BudgetLine, ServingBudget, non_torch_bytes, serving_budget_of


def budget(inp: BudgetInputs) -> ServingBudget:
    """SGLang's budget lines for one GPU (module doc)."""
    lines = []
    pool = inp.total_memory_bytes * inp.gpu_memory_utilization
    lines.append(BudgetLine("static pool", pool, f"total {inp.total_memory_bytes / GIB:.2f} GiB x mem_fraction_static "
                            f"{inp.gpu_memory_utilization:g}", inp.utilization_source))
    lines.append(BudgetLine("weights", inp.weight_bytes_per_gpu, "estimated weights per GPU", inp.weights_source))
    if inp.draft_weight_bytes:
        lines.append(BudgetLine("draft weights", inp.draft_weight_bytes, "speculative-decoding draft per GPU",
                                "kg.derive.drafts"))
    nt, nt_err, nt_basis = non_torch_bytes(inp.total_memory_bytes, inp.tp_size)
    lines.append(BudgetLine("non-torch", nt, nt_basis, "vLLM logs (PR 10511, issue 10517): SGLang's not calibrated",
                            nt_err))
    notes = ["SGLang keeps activations and CUDA graphs outside mem_fraction_static "
             "(kv_pool_runtime.py:58-110): they are not subtracted here"]
    return serving_budget_of(inp, lines, notes)
