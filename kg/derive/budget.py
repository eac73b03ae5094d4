"""A serving engine's KV-cache memory per GPU as a breakdown: each line with its basis and source.

This module holds what every engine's budget shares: the lines (``BudgetLine``) and their sum
(``ServingBudget``: ``lines[0] - sum(lines[1:])``, never negative, with an error bar), the inputs an engine's
``budget`` receives (``BudgetInputs``), the terms estimated the same way for every engine (the forward pass's peak,
the memory outside torch) and the release defaults of the memory fraction. Each engine's own arithmetic is in
its package (``kg.engines.<engine>.budget``: vLLM's profile run, SGLang's static pool, TensorRT-LLM's and LMDeploy's
fraction of the memory left free); ``kg.engines.budget.serving_budget`` picks the engine's.

Estimates, per term (the profile run of vLLM V1: ``profile_run`` ``v1/worker/gpu_model_runner.py:6072-6145``
at 0.33.0; calibration against public startup logs in ``CALIBRATION`` and tests/test_budget_calibration.py):
- forward peak: the dummy batch is ``max_num_batched_tokens`` tokens (``_dummy_run(self.max_num_tokens,
  is_profile=True)``) pushed through one layer at a time, so the peak is one layer's largest intermediates:
  per token ``(3 x ffn_per_rank + 3 x hidden) x dtype`` bytes (gate/up output, the activation, the residual
  stream and its norm); MoE layers hold the fused-MoE workspaces ``num_experts_per_tok x (max(ffn, hidden)
  + max(2 x ffn, hidden))`` per token (``fused_moe/experts/triton_moe.py:252-254``). Fitted on vLLM issue
  10517 (Llama-3.1-8B, RTX 3090, ``peak_torch_memory - weights``): 29,000 tokens 3.02 GiB predicted vs 2.99
  GiB logged (+1.0 %), 20,000 tokens 2.08 vs 2.07 GiB (+0.6 %). The sampler's peak is vLLM's
  (kg.engines.vllm.budget).
- CUDA graphs: 0.25 GiB (vLLM V1 logs show 0.09-0.41 GiB: ``Estimated CUDA graph memory``).
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
    # MLA FP8 MoE, TP 8, V0 0.7.3, 8 x H200: weights (with the absorbed MLA matrices), non-torch (NCCL in V0's
    # baseline), activation and KV budget logged; "# cuda blocks: 18418" (MLA entries padded 576 -> 640)
    {"source": "public Hexo blog post \"nvidia cuda\" (2025-03-12), its vllm 0.7.3 log of 03-15 (library id 20903468563)",
     "engine": "vllm (V0, 0.7.3)", "model": "deepseek-ai/DeepSeek-R1", "gpu": "H200",
     "logged_weights_gib": 83.88, "logged_non_torch_gib": 7.16, "logged_activation_gib": 6.37,
     "logged_kv_gib": 21.43},
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


@dataclass
class BudgetInputs:
    """What an engine's ``budget`` sizes: the GPU's memory and the engine's fraction of it (with its source), the
    weights (and a speculative draft's) per GPU, the model and its parallel layout, the profile batch
    (``max_num_batched_tokens`` tokens, ``max_num_seqs`` requests), CUDA graphs off (``enforce_eager``), the release
    (None: the latest known), what a multimodal model's encoder budget reads, a KV block's bytes and the engine's
    backend. ``engine`` labels the result."""

    engine: str | None
    total_memory_bytes: float
    gpu_memory_utilization: float
    utilization_source: str
    weight_bytes_per_gpu: float
    model: ModelFacts
    tp_size: int = 1
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    enforce_eager: bool = False
    moe_tp_size: int | None = None
    weights_source: str = "kg.derive.weights"
    draft_weight_bytes: float = 0.0
    engine_version: str | None = None
    max_model_len: int | None = None
    limit_mm_per_prompt: Any = None
    language_model_only: bool = False
    kv_bytes_per_block: float | None = None  # one KV block at the stack's block size (when the layout is sized)
    backend: str | None = None  # the engine's backend when it has several (LMDeploy: turbomind or pytorch)
    kv_sizing: str | None = None  # how the engine sizes the cache when it has several ways (vLLM >= 0.34.0:
    #                               "extensible" / "extensible-rocm", sized after warm-up; None: from the profile)
    lora_slot_bytes: float = 0.0  # vLLM --enable-lora: the adapter slots allocated at start-up (kg.derive.lora)


def serving_budget_of(inp: BudgetInputs, lines: list[BudgetLine], notes: list[str],
                      encoder_notes: list[str] | None = None, engine: str | None = None) -> ServingBudget:
    """The budget of an engine's ``lines``: ``floor(lines[0] - sum(lines[1:]))``, never negative; the error bar is
    the sum of the lines' errors. ``engine`` (default ``inp.engine``) labels it."""
    kv = float(max(0, math.floor(lines[0].bytes - sum(x.bytes for x in lines[1:]))))
    err = sum(x.error_bytes for x in lines)
    return ServingBudget(engine or inp.engine or "", inp.gpu_memory_utilization, inp.utilization_source, lines, kv,
                         err, notes, list(encoder_notes or []))


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


def engine_table(engine: str) -> dict[str, Any] | None:
    """catalog/engines/<engine>.yaml as data (the tables ``kg.inputs.stack`` reads once per file version,
    through the content-keyed cache), or None when there is none."""
    from kg.inputs.stack import _engine_tables
    return _engine_tables().get(engine) if engine else None


def release_default(engine: str, key: str, version: str | None,
                    facts: dict[str, Any] | None = None) -> tuple[Any, str] | None:
    """``(value, source)`` of an engine default that changed between releases, or None when no release
    decides it. One source of truth: the effective configuration's release table
    (catalog/engines/releases/<engine>.yaml via kg.inputs.effective.engine_default), the table ``check``
    applies to the stack; without a ``version`` the latest known release is assumed and the source says so.
    ``facts``: the stack's (kg.inputs.effective.stack_facts), which a row's ``when`` reads (vLLM 0.34.0's 1.0
    holds only with the extensible KV cache); none: a stack that sets nothing beyond the defaults, on no Intel GPU
    (``gpu_is_xpu`` False, as kg.engines.vllm release_facts has it without a GPU).
    """
    from kg.inputs.effective import engine_default, latest_release
    value, why = engine_default(engine, key, version, {"gpu_is_xpu": False, **(facts or {})})
    if value is None:
        return None
    if version:
        return value, f"{engine} {version} default: {why}"
    return value, f"{engine} default, latest known release assumed ({latest_release(engine)}): {why}"


GIVEN_FRACTION = "given (--gpu-memory-utilization / --mem-fraction-static / stack file)"


def resolve_utilization(engine: str | None, engine_version: str | None, value: Any,
                        table_default: Any = None, given: bool | None = None, *, given_source: str = GIVEN_FRACTION,
                        table_source: str | None = None, facts: dict[str, Any] | None = None) -> tuple[float, str]:
    """The ``gpu_memory_utilization`` (SGLang ``mem_fraction_static``, TensorRT-LLM's and LMDeploy's fraction of the
    free memory) a stack runs with, and why.

    ``given``: whether the stack set ``value`` itself (a flag, a stack-file setting; kg.inputs.effective
    decides it for ``check``). When None, a value other than the engine table's ``defaults`` entry counts
    as given. A value not given is replaced by the release's default, else the table's. ``given_source`` and
    ``table_source`` are how the engine names a given value and its table default (its protocol's
    ``memory_fraction``). ``facts``: the stack's, for the release rows' ``when`` (release_default).
    """
    if given is None:
        given = value is not None and (table_default is None or float(value) != float(table_default))
    if value is not None and given:
        return float(value), given_source
    rd = release_default(engine or "", "gpu_memory_utilization", engine_version, facts)
    if rd is not None:
        return float(rd[0]), rd[1]
    if value is not None:
        return float(value), table_source or f"{engine} default (catalog/engines/{engine}.yaml defaults)"
    return 0.92, "vLLM 0.33.0 default assumed (config/cache.py:215): no engine named"
