"""The serving engine's KV-cache memory per GPU as a breakdown: each line with its basis and source.

vLLM V1 (``determine_available_memory``, vLLM 0.33.0 ``v1/worker/gpu_worker.py:641-757``):

    requested    = ceil(total_memory x gpu_memory_utilization)          (v1/worker/utils.py:716-726)
    available_kv = requested - weights - activation peak - CUDA graphs - non-torch

``non_kv_cache_memory`` is what the instance consumed after profiling (weights + non-torch +
persistent buffers) plus the torch peak above it (``utils/mem_utils.py:312-321``); the CUDA-graph
estimate is subtracted by default (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, ``envs.py:2219-2221``).
``gpu_memory_utilization`` defaults per release come from the effective configuration's release table
(catalog/engines/releases/vllm.yaml: 0.92 from 0.20.0, 0.33.0 ``config/cache.py:215``; 0.9 before).

TensorRT-LLM (``trtllm-serve --kv_cache_free_gpu_memory_fraction`` / ``KvCacheConfig.free_gpu_memory_fraction``,
default 0.9): the fraction is of the memory *free after* the profiling run, not of the total. ``KvCacheCreator.
configure_kv_cache_capacity`` measures ``peak_memory`` = torch peak (weights + activations + the temporary
estimation KV) + the memory outside torch (NCCL, CUDA graphs), and ``_cal_max_memory`` sizes the cache as
``(total_gpu_memory - peak_memory + allocated_bytes) x fraction`` (NVIDIA/TensorRT-LLM
``tensorrt_llm/_torch/pyexecutor/_util.py``, the PyTorch backend ``trtllm-serve`` runs by default; read in the
public repository, release not pinned: the 1.2.1 wheel's index is not reachable from here). So

    available_kv = (total - weights - activation peak - CUDA graphs - non-torch) x free_gpu_memory_fraction

and the weights must fit the whole device, not ``fraction x total``. The profile batch is
``max_num_tokens`` tokens (``BuildConfig.max_num_tokens``, default 8,192).

SGLang (``mem_fraction_static``): the static pool (weights + KV) is ``total x mem_fraction_static``;
activations and CUDA graphs live in the remaining ``1 - mem_fraction_static``
(``model_executor/model_runner_components/kv_pool_runtime.py:58-110``: headroom
``pre_model_load_memory x (1 - mem_fraction_static)``), so only weights and non-torch memory come
out of the KV share.

Estimates, per term (the profile run of vLLM V1: ``profile_run`` ``v1/worker/gpu_model_runner.py:6072-6145``
at 0.33.0; calibration against public startup logs in ``CALIBRATION`` and tests/test_budget_calibration.py):
- forward peak: the dummy batch is ``max_num_batched_tokens`` tokens (``_dummy_run(self.max_num_tokens,
  is_profile=True)``) pushed through one layer at a time, so the peak is one layer's largest intermediates:
  per token ``(3 x ffn_per_rank + 3 x hidden) x dtype`` bytes (gate/up output, the activation, the residual
  stream and its norm); MoE layers hold the fused-MoE workspaces ``num_experts_per_tok x (max(ffn, hidden)
  + max(2 x ffn, hidden))`` per token (``fused_moe/experts/triton_moe.py:252-254``). Fitted on vLLM issue
  10517 (Llama-3.1-8B, RTX 3090, ``peak_torch_memory - weights``): 29,000 tokens 3.02 GiB predicted vs 2.99
  GiB logged (+1.0 %), 20,000 tokens 2.08 vs 2.07 GiB (+0.6 %).
- sampler peak: the dummy batch has ``R = min(max_num_batched_tokens, max_num_seqs)`` requests
  (``gpu_model_runner.py:5545``), one logit row each (``:5861``) over the whole vocabulary (gathered across
  TP), and ``_dummy_sampler_run`` samples them with top-k and top-p on. Bytes per (request, vocabulary
  entry) live at the peak, by release (``sampler_bytes_per_logit``):
  * vLLM >= 0.18.0: the logits in the model dtype (kept by the caller) + their fp32 copy
    (``v1/sample/sampler.py:158``) + the softmax probabilities (``topk_topp_sampler.py:309``) + the
    exponential noise ``q`` (``:616``); top-k/top-p run in place in Triton (``topk_topp_triton.py:1618``):
    ``dtype + 12`` bytes (14 for bf16). The second, seeded warm-up call (``gpu_model_runner.py:5923``)
    takes this native path.
  * vLLM < 0.18.0: the PyTorch sort path (0.11.0 ``topk_topp_sampler.py:183-203``): model-dtype logits,
    fp32 copy, sorted values (4), sort indices (int64, 8), sorted softmax (4, cumsum in place), the top-k
    and top-p masks (1 + 1) and the scatter's output (4): ``dtype + 26`` bytes (28 for bf16).
  The activation line is the larger of the two (the forward's intermediates are freed before sampling).
  For a large vocabulary the sampler dominates: gpt-oss-120b at 1,024 requests x 201,088 tokens x 14 B is
  2.68 GiB, at 28 B 5.37 GiB, against 0.66 GiB for its 8,192-token forward.
- CUDA graphs: 0.25 GiB (vLLM V1 logs show 0.09-0.41 GiB: ``Estimated CUDA graph memory``), 0 with
  ``enforce_eager``, and 0 before vLLM 0.20.0, where the estimate is not taken from the KV budget
  (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` absent before 0.18.0, default 0 in 0.18.0 ``envs.py:1635-1636``,
  default 1 from 0.20.0 ``envs.py:1724-1725``; graphs are then captured from the memory outside the budget).
- non-torch (CUDA context growth, NCCL, cuBLAS handles; ``non_torch_bytes``): below 70 GiB of GPU memory
  0.35 GiB at TP 1 (``non_torch_memory=0.35GiB`` in vLLM issue 10517) plus 0.25 GiB at TP > 1; on 70 GiB+
  GPUs 1.79 GiB at TP 1 and 3.58 GiB at TP > 1 (H100 logs in vLLM PR 10511, V0 0.6.5). Logs elsewhere
  show 0.11 GiB (A100-40GB, V1, eager) and imply 2.3-2.6 GiB (gpt-oss-120b, H100 TP 1) and 4.5 GiB
  (Qwen3-235B FP8, H100 TP 4 with an LMCache connector): the error bars are in ``non_torch_bytes``.
The error bar is the sum of the estimated lines' errors (activation +-15 % + 0.25 GiB, graphs +-0.25 GiB,
non-torch as above). The weights line is not in it: a checkpoint's kernel-specific padding (MXFP4 MoE on
Hopper: vLLM logs 64.38-65.97 GiB for gpt-oss-120b, optkg counts 60.69 GiB) is a known gap, see
CALIBRATION.
"""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.numfmt import fmt_error_gib
from kg.inputs.modelcfg import ModelFacts

GIB = 1024**3
CUDA_GRAPH_BYTES = 0.25 * GIB
NON_TORCH_TP1_BYTES = 0.35 * GIB           # RTX 3090 (24 GiB), vLLM issue 10517: non_torch_memory=0.35GiB
NON_TORCH_TP_EXTRA_BYTES = 0.25 * GIB      # NCCL / custom all-reduce at TP > 1 on such a GPU (assumption)
NON_TORCH_DATACENTER_TP1_BYTES = 1.79 * GIB  # H100 80 GB, TP 1: vLLM PR 10511 ("non_torch_memory 1.79GiB")
NON_TORCH_DATACENTER_TP_BYTES = 3.58 * GIB   # H100 80 GB, TP 2: vLLM PR 10511 ("non_torch_memory 3.58GiB")
DATACENTER_GPU_BYTES = 70 * GIB            # the class boundary vLLM's own defaults use (engine/arg_utils.py:2973)


def non_torch_bytes(total_memory_bytes: float, tp_size: int) -> tuple[float, float, str]:
    """(estimate, error, basis) of the memory outside the torch allocator after profiling, bytes per GPU:
    0.35 GiB (+0.25 GiB at TP > 1) below 70 GiB of GPU memory; on a 70 GiB+ GPU 1.79 GiB at TP 1 and
    3.58 GiB at TP > 1 (vLLM PR 10511's H100 logs). Error +-0.3 GiB below 70 GiB (0.11-0.35 GiB logged),
    +-0.6 GiB at TP 1 and +-1.0 GiB at TP > 1 above (gpt-oss-120b and Qwen3-235B logs imply 2.3-4.5 GiB)."""
    if total_memory_bytes >= DATACENTER_GPU_BYTES:
        if tp_size > 1:
            return NON_TORCH_DATACENTER_TP_BYTES, 1.0 * GIB, "CUDA context, cuBLAS, NCCL / custom all-reduce (H100 TP 2 log)"
        return NON_TORCH_DATACENTER_TP1_BYTES, 0.6 * GIB, "CUDA context, cuBLAS (H100 TP 1 log)"
    if tp_size > 1:
        return NON_TORCH_TP1_BYTES + NON_TORCH_TP_EXTRA_BYTES, 0.5 * GIB, "CUDA context, cuBLAS, NCCL buffers (TP > 1)"
    return NON_TORCH_TP1_BYTES, 0.3 * GIB, "CUDA context, cuBLAS"
CALIBRATION = [
    # dense, V0: the forward term (peak_torch - weights) and non-torch
    {"source": "https://github.com/vllm-project/vllm/issues/10517", "engine": "vllm (V0)",
     "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "RTX 3090", "profiled_tokens": 29000,
     "logged_activation_gib": 2.99, "predicted_activation_gib": 3.02, "logged_non_torch_gib": 0.35},
    {"source": "https://github.com/vllm-project/vllm/issues/10517", "engine": "vllm (V0)",
     "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "RTX 3090", "profiled_tokens": 20000,
     "logged_activation_gib": 2.07, "predicted_activation_gib": 2.08, "logged_non_torch_gib": 0.35},
    # dense, V0 on H100: non-torch far above the RTX 3090's (the TP > 1 error bar)
    {"source": "https://github.com/vllm-project/vllm/pull/10511", "engine": "vllm (V0, 0.6.5)",
     "model": "meta-llama/Meta-Llama-3-8B", "gpu": "H100-SXM", "logged_non_torch_gib": 1.79,
     "logged_non_torch_gib_tp2": 3.58, "logged_activation_gib": 1.26},
    # dense, V1 (recent), A100-40GB, enforce_eager: the sampler term (256 requests x 151,936 x 14 B = 0.51 GiB)
    {"source": "https://github.com/ovg-project/kvcached/pull/448", "engine": "vllm (V1)",
     "model": "Qwen/Qwen2.5-0.5B", "gpu": "A100-40GB", "logged_activation_gib": 0.59,
     "logged_non_torch_gib": 0.11},
    # MXFP4 MoE (Marlin on Hopper), V1 0.10.x: weights logged, KV budget logged
    {"source": "https://github.com/vllm-project/vllm/issues/23278", "engine": "vllm (V1)",
     "model": "openai/gpt-oss-120b", "gpu": "H100-SXM", "logged_weights_gib": 65.9651,
     "logged_kv_gib": -2.14},
    # FP8 MoE, TP 4, V1 0.10.0: KV budget logged
    {"source": "https://github.com/vllm-project/vllm/issues/21348", "engine": "vllm (V1)",
     "model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "H100-SXM", "logged_kv_gib": 8.11},
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
    encoder_notes: list[str] = field(default_factory=list)  # the multimodal encoder budget (kg.derive.encoder_cache)

    @property
    def error_text(self) -> str:
        """``kg.core.numfmt.fmt_error_gib(self.error_bytes)``: '+-1.80 GiB'."""
        return fmt_error_gib(self.error_bytes)

    def source_text(self) -> str:
        """What the budget is, in one line (check's ``kv_budget_source``, sweep's header, fit's source):
        'estimated: requested - weights - ... (kg.derive.budget; +-1.80 GiB)'."""
        return "estimated: " + " - ".join(x.name for x in self.lines) + f" (kg.derive.budget; {self.error_text})"

    def line(self, name: str) -> BudgetLine | None:
        return next((x for x in self.lines if x.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _before(engine_version: str | None, release: str) -> bool:
    """Whether a vLLM ``engine_version`` is older than ``release`` (None or unreadable: the latest, not older)."""
    from kg.core.relcmp import older_than
    return older_than(engine_version, release)


def sampler_bytes_per_logit(model: ModelFacts, engine_version: str | None = None) -> float:
    """Bytes live per (request, vocabulary entry) at the peak of vLLM's dummy sampler run (module doc):
    ``dtype + 12`` from vLLM 0.18.0 (Triton top-k/top-p), ``dtype + 26`` before (PyTorch sort path)."""
    return float(model.dtype_bytes) + (26 if _before(engine_version, "0.18.0") else 12)


def sampler_peak_bytes(model: ModelFacts, max_num_batched_tokens: int, max_num_seqs: int,
                       engine_version: str | None = None) -> float:
    """Peak of the dummy sampler run, bytes per GPU: ``min(max_num_batched_tokens, max_num_seqs)`` requests x
    ``vocab_size`` x ``sampler_bytes_per_logit`` (vLLM 0.33.0 ``gpu_model_runner.py:5545, 5861``)."""
    rows = min(int(max_num_batched_tokens), int(max_num_seqs))
    return rows * float(model.vocab_size or 0) * sampler_bytes_per_logit(model, engine_version)


def forward_peak_bytes(model: ModelFacts, tp_size: int, max_num_batched_tokens: int,
                       moe_tp_size: int | None = None) -> float:
    """Peak of the profile run's forward pass above the weights, bytes per GPU (module doc)."""
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
    return max_num_batched_tokens * per_tok


def activation_peak_bytes(model: ModelFacts, tp_size: int, max_num_batched_tokens: int, max_num_seqs: int,
                          moe_tp_size: int | None = None, engine_version: str | None = None) -> float:
    """Estimated peak of the profile run above the weights, bytes per GPU: the larger of the forward peak
    and the sampler peak (module doc; ``engine_version`` None = the latest known vLLM)."""
    return max(forward_peak_bytes(model, tp_size, max_num_batched_tokens, moe_tp_size),
               sampler_peak_bytes(model, max_num_batched_tokens, max_num_seqs, engine_version))


TRTLLM_SOURCE = ("TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory: (total_gpu_memory "
                 "- peak_memory + allocated_bytes) x fraction (public repository; release not pinned)")


def weight_share_bytes(engine: str | None, total_memory_bytes: float, gpu_memory_utilization: float) -> float:
    """The memory the weights must fit in, bytes per GPU: the whole device for TensorRT-LLM (its fraction is
    of the memory left after loading, module doc), ``total x gpu_memory_utilization`` for vLLM and SGLang."""
    if engine == "trtllm":
        return float(total_memory_bytes)
    return total_memory_bytes * gpu_memory_utilization


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


def serving_budget(engine: str, total_memory_bytes: float, gpu_memory_utilization: float, utilization_source: str,
                   weight_bytes_per_gpu: float, model: ModelFacts, tp_size: int = 1,
                   max_num_batched_tokens: int = 8192, max_num_seqs: int = 1024, enforce_eager: bool = False,
                   moe_tp_size: int | None = None, weights_source: str = "kg.derive.weights",
                   draft_weight_bytes: float = 0.0, engine_version: str | None = None,
                   max_model_len: int | None = None, limit_mm_per_prompt: Any = None,
                   language_model_only: bool = False) -> ServingBudget:
    """The budget breakdown for one GPU (see module doc). Never negative. ``engine_version``: the vLLM
    release (None: the latest known), which decides the sampler's bytes and whether CUDA graphs count.
    A multimodal or encoder-decoder model on vLLM gets an "encoder cache (profiled)" line: the dummy encoder
    outputs vLLM's profile run holds (kg.derive.encoder_cache.stack_encoder_budget, from ``max_model_len``
    (default: the model's), ``limit_mm_per_prompt`` and ``language_model_only``); its notes are ``encoder_notes``."""
    encoder_bytes, encoder_basis, encoder_notes = 0.0, "", []
    if engine not in ("trtllm", "sglang"):
        from kg.core.errors import OptkgError
        from kg.derive.encoder_cache import stack_encoder_budget
        try:
            enc, encoder_notes = stack_encoder_budget(
                model, int(max_num_batched_tokens), int(max_model_len or model.vllm_default_max_model_len
                                                        or max_num_batched_tokens), int(max_num_seqs),
                limit_mm_per_prompt, language_model_only)
        except OptkgError as e:  # vLLM refuses to start (an item over max_num_batched_tokens)
            enc, encoder_notes = None, [str(e)]
        if enc is not None and enc.profiled_bytes:
            encoder_bytes = float(enc.profiled_bytes)
            encoder_basis = (f"{enc.items_profiled} {enc.modality} item(s) x {enc.tokens_per_item:,} tokens x hidden "
                             f"{model.hidden_size:,} x {model.dtype_bytes} B (encoder budget "
                             f"{min(enc.compute_budget, enc.cache_size):,} tokens)")
    lines = []
    if engine == "trtllm":
        lines, notes = _trtllm_lines(total_memory_bytes, gpu_memory_utilization, utilization_source,
                                     weight_bytes_per_gpu, draft_weight_bytes, model, tp_size, max_num_batched_tokens,
                                     enforce_eager, moe_tp_size, weights_source)
    elif engine == "sglang":
        pool = total_memory_bytes * gpu_memory_utilization
        lines.append(BudgetLine("static pool", pool, f"total {total_memory_bytes / GIB:.2f} GiB x mem_fraction_static "
                                f"{gpu_memory_utilization:g}", utilization_source))
        lines.append(BudgetLine("weights", weight_bytes_per_gpu, "estimated weights per GPU", weights_source))
        if draft_weight_bytes:
            lines.append(BudgetLine("draft weights", draft_weight_bytes, "speculative-decoding draft per GPU",
                                    "kg.derive.drafts"))
        nt, nt_err, nt_basis = non_torch_bytes(total_memory_bytes, tp_size)
        lines.append(BudgetLine("non-torch", nt, nt_basis, "vLLM logs (PR 10511, issue 10517): SGLang's not calibrated",
                                nt_err))
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
        fwd = forward_peak_bytes(model, tp_size, max_num_batched_tokens, moe_tp_size)
        smp = sampler_peak_bytes(model, max_num_batched_tokens, max_num_seqs, engine_version)
        act = max(fwd, smp)
        rows = min(int(max_num_batched_tokens), int(max_num_seqs))
        per = sampler_bytes_per_logit(model, engine_version)
        if smp >= fwd:
            basis = (f"sampler: {rows:,} requests x vocab {model.vocab_size or 0:,} x {per:g} B "
                     f"(above the {max_num_batched_tokens:,}-token forward's {fwd / GIB:.2f} GiB)")
            src = ("vllm 0.33.0 v1/worker/gpu_model_runner.py:5545,5861,5923; v1/sample/sampler.py:158; "
                   "topk_topp_sampler.py:309,616" if per == model.dtype_bytes + 12 else
                   "vllm 0.11.0 v1/sample/sampler.py:86; v1/sample/ops/topk_topp_sampler.py:183-203")
        else:
            basis = (f"forward of max_num_batched_tokens {max_num_batched_tokens:,} tokens (above the sampler's "
                     f"{rows:,} requests: {smp / GIB:.2f} GiB)")
            src = "kg.derive.budget (calibrated: vLLM issue 10517); vllm 0.33.0 gpu_model_runner.py:6072-6145"
        lines.append(BudgetLine("activation peak", act, basis, src, 0.15 * act + 0.25 * GIB))
        if encoder_bytes:
            # the profile run keeps the dummy encoder outputs alive through the forward and sampler runs; the
            # encoder tower's own peak is not modelled: the error bar is the line itself
            lines.append(BudgetLine("encoder cache (profiled)", encoder_bytes, encoder_basis,
                                    "vllm 0.33.0 v1/worker/gpu_model_runner.py:6072-6145; "
                                    "v1/core/encoder_cache_manager.py:333-380", encoder_bytes))
        if enforce_eager:
            graphs, gbasis = 0.0, "enforce_eager: none"
        elif _before(engine_version, "0.20.0"):
            graphs, gbasis = 0.0, (f"vllm {engine_version}: not taken from the KV budget (the estimate is "
                                   "subtracted by default from 0.20.0)")
        else:
            graphs, gbasis = CUDA_GRAPH_BYTES, "estimate (logged 0.09-0.41 GiB in public vLLM V1 logs)"
        lines.append(BudgetLine("CUDA graphs", graphs, gbasis,
                                "vllm v1/worker/gpu_worker.py:753-757; envs.py:2219-2221 (0.33.0), envs.py:1635 (0.18.0)",
                                0.25 * GIB if graphs else 0.0))
        nt, nt_err, nt_basis = non_torch_bytes(total_memory_bytes, tp_size)
        lines.append(BudgetLine("non-torch", nt, nt_basis,
                                "vLLM PR 10511 (H100: 1.79 GiB TP 1, 3.58 GiB TP 2)" if total_memory_bytes >= DATACENTER_GPU_BYTES
                                else "vLLM issue 10517 log (non_torch_memory=0.35GiB at TP 1)", nt_err))
        notes = []
    kv = float(max(0, math.floor(lines[0].bytes - sum(x.bytes for x in lines[1:]))))
    err = sum(x.error_bytes for x in lines)
    return ServingBudget(engine or "vllm", gpu_memory_utilization, utilization_source, lines, kv, err, notes,
                         encoder_notes)


def gpu_default_budget(model: ModelFacts, hardware: dict[str, Any], tp_size: int = 1, pp_size: int = 1,
                       gpu_memory_utilization: float | None = None, engine_version: str | None = None) -> ServingBudget:
    """The vLLM budget of ``vllm serve MODEL -tp N -pp M`` on ``hardware`` (a catalog/hardware entry) with the
    engine's defaults, as ``check`` derives it for that stack: visible memory (kg.derive.kv.gpu_memory_bytes) x
    the release's gpu_memory_utilization - weights (kg.derive.weights) - activation peak at ``vllm serve``'s
    max_num_batched_tokens / max_num_seqs for the GPU - CUDA graphs - non-torch. ``optkg kv --gpu`` and ``fit``
    use it. Raises OptkgError when the entry has no memory."""
    from kg.core.errors import OptkgError
    from kg.derive.kv import gpu_memory_bytes, weight_bytes_per_gpu
    from kg.derive.kv_specs import default_max_num_batched_tokens
    total = gpu_memory_bytes(hardware)
    if not total or total <= 0:
        raise OptkgError(f"GPU '{hardware.get('id')}' has no memory_gib in the catalog (catalog/hardware/)")
    util, util_source = resolve_utilization("vllm", engine_version, gpu_memory_utilization)
    mem = hardware.get("memory_gib")
    mnbt = default_max_num_batched_tokens(float(mem) if mem else None, str(hardware.get("id") or ""))
    return serving_budget("vllm", total, util, util_source, weight_bytes_per_gpu(model, tp_size, pp_size), model,
                          tp_size, mnbt, 256 if mnbt == 2048 else 1024, engine_version=engine_version)


def engine_table(engine: str) -> dict[str, Any] | None:
    """catalog/engines/<engine>.yaml as data (the tables ``kg.inputs.stack`` reads once per file version,
    through the content-keyed cache), or None when there is none."""
    from kg.inputs.stack import _engine_tables
    return _engine_tables().get(engine) if engine else None


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
        if engine == "trtllm":
            return float(value), ("given (--kv_cache_free_gpu_memory_fraction / --free_gpu_memory_fraction / "
                                  "kv_cache_config.free_gpu_memory_fraction): a fraction of the memory free after loading")
        return float(value), "given (--gpu-memory-utilization / --mem-fraction-static / stack file)"
    rd = release_default(engine or "", "gpu_memory_utilization", engine_version)
    if rd is not None:
        return float(rd[0]), rd[1]
    if value is not None and engine == "trtllm":
        return float(value), ("trtllm default free_gpu_memory_fraction (catalog/engines/trtllm.yaml defaults: serve.py "
                              "--kv_cache_free_gpu_memory_fraction default=0.9), a fraction of the memory free after loading")
    if value is not None:
        return float(value), f"{engine} default (catalog/engines/{engine}.yaml defaults)"
    return 0.92, "vLLM 0.33.0 default assumed (config/cache.py:215): no engine named"
