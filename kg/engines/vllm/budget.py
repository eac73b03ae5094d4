"""vLLM's KV-cache memory per GPU: the budget lines of its profile run (kg.derive.budget for the shared terms).

vLLM V1 (``determine_available_memory``, vLLM 0.33.0 ``v1/worker/gpu_worker.py:641-757``):

    requested    = ceil(total_memory x gpu_memory_utilization)          (0.33.0 v1/worker/utils.py:724; 0.34.0 :743)
    available_kv = requested - weights - activation peak - CUDA graphs - non-torch

``non_kv_cache_memory`` is what the instance consumed after profiling (weights + non-torch +
persistent buffers) plus the torch peak above it (``utils/mem_utils.py:312-321``); the CUDA-graph
estimate is subtracted by default (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, ``envs.py:2219-2221``).
``gpu_memory_utilization`` defaults per release come from the effective configuration's release table
(catalog/engines/releases/vllm.yaml: 0.92 from 0.20.0, 0.33.0 ``config/cache.py:215``; 0.9 before; 1.0 from
0.34.0 with the extensible KV cache, ``config/cache.py:495-501``).

vLLM >= 0.34.0 with the extensible KV cache (on by default, kg.engines.vllm.VLLM.kv_sizing) sizes the cache
after warm-up and CUDA-graph capture (0.34.0 ``v1/worker/extensible_kv_cache.py:592-617``):

    available = min(requested - non_kv_used, headroom - margin) - max(transient_peak, torch_reserve_growth)
    margin    = max(1 GiB (3 GiB on ROCm), 0.75 x transient_peak)                 (:64-65, :615)

``headroom - non_kv_used`` is the memory free at start-up (``init_free``), so this is the profile budget with
``requested`` capped at ``total - margin``: the "extensible-cache margin" line (it binds at the 1.0 default,
not at 0.9). ``transient_peak`` is the profiled peak plus the CUDA-graph estimate (``gpu_worker.py:771-773``,
kept as ``reserved_headroom_bytes`` :946-948), while ``non_kv_used`` is measured after capture and holds the
graphs too: the estimate is kept free twice ("transient peak: CUDA graphs"). The memory held before vLLM's
start-up snapshot (CUDA context, NCCL) is read as part of the non-torch line.

The activation line is the larger of the forward peak (kg.derive.budget.forward_peak_bytes) and the sampler peak:
the dummy batch has ``R = min(max_num_batched_tokens, max_num_seqs)`` requests (``gpu_model_runner.py:5545``), one
logit row each (``:5861``) over the whole vocabulary (gathered across TP), and ``_dummy_sampler_run`` samples them
with top-k and top-p on. Bytes per (request, vocabulary entry) live at the peak, by release
(``sampler_bytes_per_logit``):
* vLLM >= 0.18.0: the logits in the model dtype (kept by the caller) + their fp32 copy
  (``v1/sample/sampler.py:158``) + the softmax probabilities (``topk_topp_sampler.py:309``) + the
  exponential noise ``q`` (``:616``); top-k/top-p run in place in Triton (``topk_topp_triton.py:1618``):
  ``dtype + 12`` bytes (14 for bf16). The second, seeded warm-up call (``gpu_model_runner.py:5923``)
  takes this native path.
* vLLM < 0.18.0: the PyTorch sort path (0.11.0 ``topk_topp_sampler.py:183-203``): model-dtype logits,
  fp32 copy, sorted values (4), sort indices (int64, 8), sorted softmax (4, cumsum in place), the top-k
  and top-p masks (1 + 1) and the scatter's output (4): ``dtype + 26`` bytes (28 for bf16).
For a large vocabulary the sampler dominates: gpt-oss-120b at 1,024 requests x 201,088 tokens x 14 B is
2.68 GiB, at 28 B 5.37 GiB, against 0.66 GiB for its 8,192-token forward.

CUDA graphs: 0.25 GiB (vLLM V1 logs show 0.09-0.41 GiB: ``Estimated CUDA graph memory``), 0 with
``enforce_eager``, and 0 before vLLM 0.20.0, where the estimate is not taken from the KV budget
(``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` absent before 0.18.0, default 0 in 0.18.0 ``envs.py:1635-1636``,
default 1 from 0.20.0 ``envs.py:1724-1725``; graphs are then captured from the memory outside the budget).
A multimodal or encoder-decoder model gets an "encoder cache (profiled)" line (kg.derive.encoder_cache).
"""
from __future__ import annotations

import math
from typing import Any

from kg.derive.budget import (CUDA_GRAPH_BYTES, DATACENTER_GPU_BYTES, GIB, NON_TORCH_DATACENTER_TP1_BYTES, BudgetInputs,
                              BudgetLine, ServingBudget, forward_peak_bytes, non_torch_bytes, serving_budget_of)
from kg.inputs.modelcfg import ModelFacts

KV_CACHE_MARGIN_FRACTION = 0.75  # vllm 0.34.0 v1/worker/extensible_kv_cache.py:65 (floor 1 GiB, ROCm 3 GiB: :64)


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


def activation_peak_bytes(model: ModelFacts, tp_size: int, max_num_batched_tokens: int, max_num_seqs: int,
                          moe_tp_size: int | None = None, engine_version: str | None = None) -> float:
    """Estimated peak of the profile run above the weights, bytes per GPU: the larger of the forward peak
    and the sampler peak (module doc; ``engine_version`` None = the latest known vLLM)."""
    return max(forward_peak_bytes(model, tp_size, max_num_batched_tokens, moe_tp_size),
               sampler_peak_bytes(model, max_num_batched_tokens, max_num_seqs, engine_version))


def budget(inp: BudgetInputs) -> ServingBudget:
    """vLLM's budget lines for one GPU (module doc): requested - weights - draft - activation peak - encoder
    cache - CUDA graphs - non-torch. Never negative. ``inp.engine_version``: the vLLM release (None: the latest
    known), which decides the sampler's bytes and whether CUDA graphs count."""
    model, total_memory_bytes = inp.model, inp.total_memory_bytes
    max_num_batched_tokens, max_num_seqs, engine_version = inp.max_num_batched_tokens, inp.max_num_seqs, inp.engine_version
    encoder_bytes, encoder_basis, encoder_notes = 0.0, "", []
    from kg.core.errors import OptkgError
    from kg.derive.encoder_cache import stack_encoder_budget
    try:
        enc, encoder_notes = stack_encoder_budget(
            model, int(max_num_batched_tokens), int(inp.max_model_len or model.vllm_default_max_model_len
                                                    or max_num_batched_tokens), int(max_num_seqs),
            inp.limit_mm_per_prompt, inp.language_model_only)
    except OptkgError as e:  # vLLM refuses to start (an item over max_num_batched_tokens)
        enc, encoder_notes = None, [str(e)]
    if enc is not None and enc.profiled_bytes:
        encoder_bytes = float(enc.profiled_bytes)
        encoder_basis = (f"{enc.items_profiled} {enc.modality} item(s) x {enc.tokens_per_item:,} tokens x hidden "
                         f"{model.hidden_size:,} x {model.dtype_bytes} B (encoder budget "
                         f"{min(enc.compute_budget, enc.cache_size):,} tokens)")
    lines = []
    requested = math.ceil(total_memory_bytes * inp.gpu_memory_utilization)
    lines.append(BudgetLine("requested", requested, f"ceil(total {total_memory_bytes / GIB:.2f} GiB x "
                            f"gpu_memory_utilization {inp.gpu_memory_utilization:g})",
                            f"{requested_source(engine_version)}; {inp.utilization_source}"))
    lines.append(BudgetLine("weights", inp.weight_bytes_per_gpu, "estimated weights per GPU", inp.weights_source))
    absorbed, absorbed_basis = v0_mla_absorbed_bytes(model, inp.tp_size, engine_version)
    if absorbed:
        lines.append(BudgetLine("MLA absorbed weights", absorbed, absorbed_basis,
                                "vllm 0.7.3 attention/backends/mla/utils.py:297-388; envs.py:546-547"))
    if inp.draft_weight_bytes:
        lines.append(BudgetLine("draft weights", inp.draft_weight_bytes, "speculative-decoding draft per GPU",
                                "kg.derive.drafts"))
    if inp.lora_slot_bytes:
        from kg.derive.lora import SOURCE as LORA_SOURCE
        lines.append(BudgetLine("LoRA slots", inp.lora_slot_bytes, "max_loras x A/B matrices of every linear layer",
                                LORA_SOURCE))
    fwd = forward_peak_bytes(model, inp.tp_size, max_num_batched_tokens, inp.moe_tp_size)
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
        if not _before(engine_version, "0.34.0"):  # the V2 runner (no v1/worker/gpu_model_runner.py): same pass
            src = ("vllm 0.34.0 v1/worker/gpu/model_runner.py:1039-1061 (_dummy_sampler_run; bytes per logit as "
                   "read at 0.33.0: " + src.removeprefix("vllm 0.33.0 ") + ")")
    else:
        basis = (f"forward of max_num_batched_tokens {max_num_batched_tokens:,} tokens (above the sampler's "
                 f"{rows:,} requests: {smp / GIB:.2f} GiB)")
        src = "kg.derive.budget (calibrated: vLLM issue 10517); vllm 0.33.0 gpu_model_runner.py:6072-6145"
    act_err = 0.15 * act + 0.25 * GIB
    lines.append(BudgetLine("activation peak", act, basis, src, act_err))
    if encoder_bytes:
        # the profile run keeps the dummy encoder outputs alive through the forward and sampler runs; the
        # encoder tower's own peak is not modelled: the error bar is the line itself
        lines.append(BudgetLine("encoder cache (profiled)", encoder_bytes, encoder_basis,
                                "vllm 0.33.0 v1/worker/gpu_model_runner.py:6072-6145; "
                                "v1/core/encoder_cache_manager.py:333-380", encoder_bytes))
    if inp.enforce_eager:
        graphs, gbasis = 0.0, "enforce_eager: none"
    elif _before(engine_version, "0.20.0"):
        graphs, gbasis = 0.0, (f"vllm {engine_version}: not taken from the KV budget (the estimate is "
                               "subtracted by default from 0.20.0)")
    else:
        graphs, gbasis = CUDA_GRAPH_BYTES, "estimate (logged 0.09-0.41 GiB in public vLLM V1 logs)"
    lines.append(BudgetLine("CUDA graphs", graphs, gbasis,
                            "vllm 0.33.0 v1/worker/gpu_worker.py:753-757, envs.py:2219-2221; 0.18.0 envs.py:1635",
                            0.25 * GIB if graphs else 0.0))
    nt, nt_err, nt_basis = non_torch_bytes(total_memory_bytes, inp.tp_size)
    nt_src = ("vLLM PR 10511 (H100: 1.79 GiB TP 1, 3.58 GiB TP 2)" if total_memory_bytes >= DATACENTER_GPU_BYTES
              else "vLLM issue 10517 log (non_torch_memory=0.35GiB at TP 1)")
    if _before(engine_version, "0.8.0") and total_memory_bytes >= DATACENTER_GPU_BYTES and inp.tp_size > 2:
        nt, nt_basis, nt_src = v0_non_torch_bytes(inp.tp_size)
    lines.append(BudgetLine("non-torch", nt, nt_basis, nt_src, nt_err))
    if inp.kv_sizing and inp.kv_sizing.startswith("extensible"):
        ext = extensible_lines(requested, total_memory_bytes, act, act_err, graphs, inp.kv_sizing == "extensible-rocm")
        margin = [x for x in ext if x.name == "extensible-cache margin"]
        lines[-1:-1] = [x for x in ext if x not in margin]  # after CUDA graphs, before non-torch
        lines += margin  # last: lines[1] stays the weights (kg.analyses.fit)
    return serving_budget_of(inp, lines, [], encoder_notes, engine=inp.engine or "vllm")


def requested_source(engine_version: str | None) -> str:
    """Where the worker computes ``requested = total x gpu_memory_utilization`` at ``engine_version`` (None: the
    latest): catalog/engines/vllm.yaml ``ranged_facts`` budget_requested_source (V1) / budget_requested_source_v0
    (before 0.8.0, the V0 default), each value naming the read release it holds for (``optkg evidence`` checks
    them); a release before any read one names what was read."""
    from kg.inputs.optiondefaults import ranged_fact
    v0 = _before(engine_version, "0.8.0")
    src = ranged_fact("vllm", engine_version, "budget_requested_source_v0" if v0 else "budget_requested_source")
    if src:
        return str(src)
    return (f"vllm worker/worker.py determine_num_available_blocks (vllm {engine_version} not read; "
            "0.7.1 worker/worker.py:232)" if v0 else "vllm v1/worker/gpu_worker.py determine_available_memory")


def v0_non_torch_bytes(tp_size: int) -> tuple[float, str, str]:
    """V0's non-torch line on a 70 GiB+ GPU at TP > 2: (bytes, basis, source). V0 takes its baseline snapshot
    before the distributed environment (0.7.3 ``worker/worker.py:161-167``: ``MemorySnapshot()``, then
    ``init_worker_distributed_environment``), so ``non_torch_increase`` (``utils.py:2037``) holds the NCCL
    communicators and custom all-reduce buffers, which grow with the group: the V0 logs give 1.79 GiB at TP 1 and
    3.58 GiB at TP 2 (H100, vLLM PR 10511) and 7.16 GiB at TP 8 (8 x H200, 0.7.3, DeepSeek-R1), i.e.
    1.79 GiB x (1 + log2 TP). V1 (0.33.0 ``gpu_worker.py:504-541``) snapshots after NCCL: not this line."""
    nt = NON_TORCH_DATACENTER_TP1_BYTES * (1 + math.log2(tp_size))
    return nt, f"V0: 1.79 GiB x (1 + log2 TP {tp_size}), NCCL in the baseline", \
        ("vLLM PR 10511 (H100 TP 1 / 2); 8 x H200 vllm 0.7.3 log (non_torch_memory 7.16GiB, TP 8); "
         "vllm 0.7.3 worker/worker.py:161-167")


def v0_mla_absorbed_bytes(model: ModelFacts, tp_size: int, engine_version: str | None) -> tuple[float, str]:
    """Bytes per GPU of the matrices vLLM 0.7.1-0.7.3's MLA backend builds once the weights are loaded, and their
    basis ((0.0, "") for another release or a model without MLA). ``MLACommonImpl.process_weights_after_loading``
    (0.7.3 ``attention/backends/mla/utils.py:297-388``; 0.7.1 :295-385) keeps, per layer and rank (``H`` heads per
    rank): ``W_UK`` / ``W_UV``, the dequantised ``kv_b_proj`` (``kv_lora x H x (nope + v)`` in the model dtype;
    a view of the weight when it is not quantised), ``W_QR`` (``q_lora x H x rope``, model dtype), and the
    absorbed ``W_Q_UK`` (``q_lora x H x kv_lora``) and ``W_UV_O`` (``H x kv_lora x hidden``), requantised to FP8
    with 128 x 128 block scales when the checkpoint is FP8 (:331-336, :360-385), else in the model dtype. The
    profile run counts them as weights (``model weights take``); ``VLLM_MLA_PERFORM_MATRIX_ABSORPTION=1`` is the
    default (envs.py:546-547 at 0.7.3). 0.8.0 replaced the absorbed matrices (mla/common.py:1073-1122)."""
    from kg.core.relcmp import older_than
    if not model.is_mla or not model.kv_lora_rank or not engine_version or older_than(engine_version, "0.7.1") \
            or not older_than(engine_version, "0.8.0"):
        return 0.0, ""
    from kg.derive.weights import weight_scheme
    act = float(model.dtype_bytes)
    heads = model.num_attention_heads / tp_size
    lora, nope, rope = model.kv_lora_rank, model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
    v, hidden = model.v_head_dim, model.hidden_size
    q = model.q_lora_rank or hidden
    fp8 = weight_scheme(model).method == "fp8"
    quantized = weight_scheme(model).method != "none"
    w_b = 1.0 if fp8 else act
    per_layer = (lora * heads * (nope + v) * act if quantized else 0.0) + q * heads * rope * act \
        + q * heads * lora * w_b + heads * lora * hidden * w_b
    if fp8:  # 128 x 128 block scales, fp32
        hl = math.ceil(heads * lora / 128)
        per_layer += (math.ceil(q / 128) * hl + hl * math.ceil(hidden / 128)) * 4
    total = per_layer * model.num_hidden_layers
    return total, (f"vllm {engine_version} MLA: {model.num_hidden_layers} layers x {per_layer / 2**20:.1f} MiB "
                   f"(W_Q_UK, W_UV_O{' in FP8' if fp8 else ''}, W_QR, W_UK/W_UV) per GPU")


def extensible_lines(requested: float, total_memory_bytes: float, act: float, act_err: float, graphs: float,
                     rocm: bool = False) -> list[BudgetLine]:
    """The lines vLLM >= 0.34.0's extensible KV cache adds to the profile budget (module doc): the sizing margin,
    by which the device headroom caps ``requested`` (only when it binds), and the CUDA-graph estimate the transient
    peak keeps free a second time (the captured graphs are already in the measured non-KV memory)."""
    peak = act + graphs  # peak_activation_memory = profiled transient + CUDA-graph estimate
    floor = (3 if rocm else 1) * GIB
    margin = max(floor, KV_CACHE_MARGIN_FRACTION * peak)
    cap = max(0.0, requested - (total_memory_bytes - margin))
    binds = "the fraction" if KV_CACHE_MARGIN_FRACTION * peak > floor else f"the {floor / GIB:g} GiB floor"
    src = ("vllm 0.34.0 v1/worker/extensible_kv_cache.py:64-65,614-617 (measure_kv_cache_bytes), "
           "v1/worker/gpu_worker.py:771-773,946-948,1231-1237")
    out = [] if not cap else [BudgetLine("extensible-cache margin", cap,
                      f"min(requested, total {total_memory_bytes / GIB:.2f} GiB - margin {margin / GIB:.2f} GiB): "
                      f"margin max({floor / GIB:g} GiB, 0.75 x transient peak {peak / GIB:.2f} GiB), {binds}",
                      src, KV_CACHE_MARGIN_FRACTION * act_err if margin > floor else 0.0)]
    if graphs:
        out.append(BudgetLine("transient peak: CUDA graphs", graphs,
                              "the CUDA-graph estimate is part of the transient peak kept free after capture",
                              "vllm 0.34.0 v1/worker/gpu_worker.py:771-773; extensible_kv_cache.py:641,617",
                              0.25 * GIB))
    return out


def extensible_sizing(hardware: dict[str, Any] | None) -> str | None:
    """The extensible KV cache's sizing on the GPU (vLLM >= 0.34.0, on by default): ``"extensible-rocm"`` on an AMD
    GPU, ``"extensible"`` on any other CUDA-alike one; None on an Intel GPU (the XPU platform), where vLLM turns it off
    ("it is only supported on CUDA and ROCm", 0.34.0 config/vllm.py:3200-3201)."""
    vendor = str((hardware or {}).get("vendor") or "").lower()
    return None if vendor == "intel" else "extensible-rocm" if vendor == "amd" else "extensible"


def gpu_default_budget(model: ModelFacts, hardware: dict[str, Any], tp_size: int = 1, pp_size: int = 1,
                       gpu_memory_utilization: float | None = None, engine_version: str | None = None) -> ServingBudget:
    """The vLLM budget of ``vllm serve MODEL -tp N -pp M`` on ``hardware`` (a catalog/hardware entry) with the
    engine's defaults, as ``check`` derives it for that stack: visible memory (kg.derive.kv.gpu_memory_bytes) x
    the release's gpu_memory_utilization - weights (kg.derive.weights) - activation peak at ``vllm serve``'s
    max_num_batched_tokens / max_num_seqs for the GPU - CUDA graphs - non-torch. ``optkg kv --gpu`` and ``fit``
    use it. Raises OptkgError when the entry has no memory."""
    from kg.core.errors import OptkgError
    from kg.derive.budget import resolve_utilization
    from kg.derive.kv import gpu_memory_bytes, weight_bytes_per_gpu
    from kg.engines.vllm.kv_plan import default_max_num_batched_tokens
    total = gpu_memory_bytes(hardware)
    if not total or total <= 0:
        raise OptkgError(f"GPU '{hardware.get('id')}' has no memory_gib in the catalog (catalog/hardware/)")
    # the release rows' when reads whether the GPU is Intel's (vLLM's XPU platform has no extensible KV cache, config/
    # vllm.py:3200-3201 at 0.34.0), as check's stack facts give it (kg.engines.vllm release_facts)
    xpu = str(hardware.get("vendor") or "").lower() == "intel"
    util, util_source = resolve_utilization("vllm", engine_version, gpu_memory_utilization, facts={"gpu_is_xpu": xpu})
    mem = hardware.get("memory_gib")
    mnbt = default_max_num_batched_tokens(float(mem) if mem else None, str(hardware.get("id") or ""),
                                          hardware.get("compute_capability"), engine_version)
    sizing = None if xpu or _before(engine_version, "0.34.0") else extensible_sizing(hardware)
    return budget(BudgetInputs("vllm", total, util, util_source, weight_bytes_per_gpu(model, tp_size, pp_size), model,
                               tp_size, mnbt, 256 if mnbt == 2048 else 1024, engine_version=engine_version,
                               kv_sizing=sizing))
