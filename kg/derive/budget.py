"""The serving engine's KV-cache memory per GPU as a breakdown: each line with its basis and source.

vLLM V1 (``determine_available_memory``, vLLM 0.33.0 ``v1/worker/gpu_worker.py:641-757``):

    requested    = ceil(total_memory x gpu_memory_utilization)          (v1/worker/utils.py:716-726)
    available_kv = requested - weights - activation peak - CUDA graphs - non-torch

``non_kv_cache_memory`` is what the instance consumed after profiling (weights + non-torch +
persistent buffers) plus the torch peak above it (``utils/mem_utils.py:312-321``); the CUDA-graph
estimate is subtracted by default (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, ``envs.py:2219-2221``).
``gpu_memory_utilization`` defaults per release come from the effective configuration's release table
(catalog/engines/releases/vllm.yaml: 0.92 from 0.20.0, 0.33.0 ``config/cache.py:215``; 0.9 before).

SGLang (``mem_fraction_static``): the static pool (weights + KV) is ``total x mem_fraction_static``;
activations and CUDA graphs live in the remaining ``1 - mem_fraction_static``
(``model_executor/model_runner_components/kv_pool_runtime.py:58-110``: headroom
``pre_model_load_memory x (1 - mem_fraction_static)``), so only weights and non-torch memory come
out of the KV share.

Estimates (calibrated on public startup logs; see ``CALIBRATION``):
- activation peak: the profile run pushes ``max_num_batched_tokens`` tokens through one layer at a
  time, so the peak is one layer's largest intermediates: per token ``(3 x ffn_per_rank + 3 x
  hidden) x dtype`` bytes (gate/up output, the activation, the residual stream and its norm); MoE
  layers hold the fused-MoE workspaces ``num_experts_per_tok x (max(ffn, hidden) + max(2 x ffn,
  hidden))`` per token (``fused_moe/experts/triton_moe.py:252-254``); or the sampler's fp32 logits and probabilities
  for ``max_num_seqs`` requests (``max_num_seqs x vocab x 8`` bytes) when that is larger (they are
  live after the MLP buffers are freed). Calibration, vLLM issue 10517 (Llama-3.1-8B on an RTX 3090,
  ``peak_torch_memory - weights``): 29,000 profiled tokens 3.02 GiB predicted vs 2.99 GiB logged
  (+1.0 %), 20,000 tokens 2.08 vs 2.07 GiB (+0.6 %).
- CUDA graphs: 0.25 GiB (vLLM V1 logs show 0.09-0.41 GiB: ``Estimated CUDA graph memory``), 0 with
  ``enforce_eager``.
- non-torch (CUDA context, NCCL, cuBLAS handles): 0.35 GiB at TP 1 (``non_torch_memory=0.35GiB`` in
  vLLM issue 10517), plus 0.25 GiB for NCCL / custom all-reduce buffers when TP > 1 (an assumption,
  within the error bar).
The error bar is the sum of the estimated lines' errors (activation +-15 % + 0.25 GiB, graphs
+-0.25 GiB, non-torch +-0.3 GiB): the activation model was fitted on one dense model, so MoE and
other architectures get the wider share.
"""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.inputs.modelcfg import ModelFacts

GIB = 1024**3
CUDA_GRAPH_BYTES = 0.25 * GIB
NON_TORCH_TP1_BYTES = 0.35 * GIB
NON_TORCH_TP_EXTRA_BYTES = 0.25 * GIB
CALIBRATION = [
    {"source": "https://github.com/vllm-project/vllm/issues/10517", "engine": "vllm (V0)",
     "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "RTX 3090", "profiled_tokens": 29000,
     "logged_activation_gib": 2.99, "predicted_activation_gib": 3.02, "logged_non_torch_gib": 0.35},
    {"source": "https://github.com/vllm-project/vllm/issues/10517", "engine": "vllm (V0)",
     "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "RTX 3090", "profiled_tokens": 20000,
     "logged_activation_gib": 2.07, "predicted_activation_gib": 2.08, "logged_non_torch_gib": 0.35},
]


@dataclass
class BudgetLine:
    """One line of the budget: ``bytes`` (positive; subtracted unless it is the first line)."""

    name: str
    bytes: float
    basis: str
    source: str
    error_bytes: float = 0.0


@dataclass
class ServingBudget:
    """KV-cache memory per GPU as ``lines[0] - sum(lines[1:])`` (bytes), with an error bar."""

    engine: str
    gpu_memory_utilization: float
    utilization_source: str
    lines: list[BudgetLine]
    kv_bytes: float
    error_bytes: float
    notes: list[str] = field(default_factory=list)

    def line(self, name: str) -> BudgetLine | None:
        return next((x for x in self.lines if x.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def activation_peak_bytes(model: ModelFacts, tp_size: int, max_num_batched_tokens: int, max_num_seqs: int,
                          moe_tp_size: int | None = None) -> float:
    """Estimated peak of the profile run above the weights, bytes per GPU (see module doc)."""
    b = float(model.dtype_bytes)
    h = model.hidden_size
    dense_ffn = (model.dense_intermediate_size or model.intermediate_size or 4 * h) / tp_size
    per_tok = (3 * dense_ffn + 3 * h) * b if (not model.is_moe or model.num_moe_layers < model.num_hidden_layers) else 0
    if model.is_moe:
        mt = moe_tp_size or tp_size
        e_ffn = (model.expert_intermediate_size or model.intermediate_size or 4 * h) / mt
        topk = model.num_experts_per_tok or 1
        shared = (model.shared_expert_intermediate_size or 0) / tp_size
        # Triton fused-MoE workspaces per token: topk x (max(ffn, hidden) + max(2 x ffn, hidden)) plus the
        # (M, hidden) output (vllm 0.33.0 model_executor/layers/fused_moe/experts/triton_moe.py:252-254)
        per_tok = max(per_tok, (topk * (max(e_ffn, h) + max(2 * e_ffn, h)) + 3 * shared + 3 * h) * b)
    sampler = max_num_seqs * (model.vocab_size or 0) * 8
    return max(max_num_batched_tokens * per_tok, sampler)


def serving_budget(engine: str, total_memory_bytes: float, gpu_memory_utilization: float, utilization_source: str,
                   weight_bytes_per_gpu: float, model: ModelFacts, tp_size: int = 1,
                   max_num_batched_tokens: int = 8192, max_num_seqs: int = 1024, enforce_eager: bool = False,
                   moe_tp_size: int | None = None, weights_source: str = "kg.derive.weights",
                   draft_weight_bytes: float = 0.0) -> ServingBudget:
    """The budget breakdown for one GPU (see module doc). Never negative."""
    lines = []
    if engine == "sglang":
        pool = total_memory_bytes * gpu_memory_utilization
        lines.append(BudgetLine("static pool", pool, f"total {total_memory_bytes / GIB:.2f} GiB x mem_fraction_static "
                                f"{gpu_memory_utilization:g}", utilization_source))
        lines.append(BudgetLine("weights", weight_bytes_per_gpu, "estimated weights per GPU", weights_source))
        if draft_weight_bytes:
            lines.append(BudgetLine("draft weights", draft_weight_bytes, "speculative-decoding draft per GPU",
                                    "kg.derive.drafts"))
        nt = NON_TORCH_TP1_BYTES + (NON_TORCH_TP_EXTRA_BYTES if tp_size > 1 else 0)
        lines.append(BudgetLine("non-torch", nt, "CUDA context, NCCL", "vLLM issue 10517 log (non_torch_memory=0.35GiB)",
                                0.3 * GIB))
        notes = ["SGLang keeps activations and CUDA graphs outside mem_fraction_static "
                 "(kv_pool_runtime.py:58-110): they are not subtracted here"]
    else:
        requested = math.ceil(total_memory_bytes * gpu_memory_utilization)
        lines.append(BudgetLine("requested", requested, f"ceil(total {total_memory_bytes / GIB:.2f} GiB x "
                                f"gpu_memory_utilization {gpu_memory_utilization:g})",
                                f"vllm v1/worker/utils.py:716-726; {utilization_source}"))
        lines.append(BudgetLine("weights", weight_bytes_per_gpu, "estimated weights per GPU", weights_source))
        if draft_weight_bytes:
            lines.append(BudgetLine("draft weights", draft_weight_bytes, "speculative-decoding draft per GPU",
                                    "kg.derive.drafts"))
        act = activation_peak_bytes(model, tp_size, max_num_batched_tokens, max_num_seqs, moe_tp_size)
        lines.append(BudgetLine("activation peak", act,
                                f"profile run of max_num_batched_tokens {max_num_batched_tokens:,} tokens and "
                                f"{max_num_seqs:,} sampled sequences", "kg.derive.budget (calibrated: vLLM issue 10517)",
                                0.15 * act + 0.25 * GIB))
        graphs = 0.0 if enforce_eager else CUDA_GRAPH_BYTES
        lines.append(BudgetLine("CUDA graphs", graphs, "enforce_eager: none" if enforce_eager else
                                "estimate (logged 0.09-0.41 GiB in public vLLM V1 logs)",
                                "vllm v1/worker/gpu_worker.py:753-757; envs.py:2219-2221", 0 if enforce_eager else 0.25 * GIB))
        nt = NON_TORCH_TP1_BYTES + (NON_TORCH_TP_EXTRA_BYTES if tp_size > 1 else 0)
        lines.append(BudgetLine("non-torch", nt, "CUDA context, cuBLAS" + (", NCCL buffers (TP > 1)" if tp_size > 1 else ""),
                                "vLLM issue 10517 log (non_torch_memory=0.35GiB at TP 1)", 0.3 * GIB))
        notes = []
    kv = float(max(0, math.floor(lines[0].bytes - sum(x.bytes for x in lines[1:]))))
    err = sum(x.error_bytes for x in lines)
    return ServingBudget(engine or "vllm", gpu_memory_utilization, utilization_source, lines, kv, err, notes)


def engine_table(engine: str) -> dict[str, Any] | None:
    """catalog/engines/<engine>.yaml as data (parsed once per file version), or None when there is none."""
    from kg.core import paths
    f = paths.catalog_dir() / "engines" / f"{engine}.yaml"
    if not engine or not f.is_file():
        return None
    st = f.stat()
    return _load_table(str(f), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _load_table(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    from kg.core.yamlio import load_yaml
    data = load_yaml(path).data
    return data if isinstance(data, dict) else {}


def release_default(engine: str, key: str, version: str | None) -> tuple[Any, str] | None:
    """``(value, source)`` of an engine default that changed between releases, or None when no release
    decides it. One source of truth: the effective configuration's release table
    (catalog/engines/releases/<engine>.yaml via kg.inputs.effective.engine_default), the table ``check``
    applies to the stack; without a ``version`` the latest known release is assumed and the source says so.
    """
    from kg.inputs.effective import engine_default, latest_release
    value, why = engine_default(engine, key, version, {})
    if value is None:
        return None
    if version:
        return value, f"{engine} {version} default: {why}"
    return value, f"{engine} default, latest known release assumed ({latest_release(engine)}): {why}"


def resolve_utilization(engine: str | None, engine_version: str | None, value: Any,
                        table_default: Any = None, given: bool | None = None) -> tuple[float, str]:
    """The ``gpu_memory_utilization`` (SGLang ``mem_fraction_static``) a stack runs with, and why.

    ``given``: whether the stack set ``value`` itself (a flag, a stack-file setting; kg.inputs.effective
    decides it for ``check``). When None, a value other than the engine table's ``defaults`` entry counts
    as given. A value not given is replaced by the release's default.
    """
    if given is None:
        given = value is not None and (table_default is None or float(value) != float(table_default))
    if value is not None and given:
        return float(value), "given (--gpu-memory-utilization / --mem-fraction-static / stack file)"
    rd = release_default(engine or "", "gpu_memory_utilization", engine_version)
    if rd is not None:
        return float(rd[0]), rd[1]
    if value is not None:
        return float(value), f"{engine} default (catalog/engines/{engine}.yaml defaults)"
    return 0.92, "vLLM 0.33.0 default assumed (config/cache.py:215): no engine named"
