"""How each serving engine's settings become the estimator's terms: one entry per estimator backend in
``ENGINES`` (a table, not a chain of engine-name tests). The engine package names its backend
(``kg.engines.<engine>.ENGINE.speed_backend``: vLLM -> ``vllm``, SGLang -> ``sglang``, TensorRT-LLM -> ``trtllm``;
LMDeploy has none); the entries below are each backend's scheduler semantics.

Per engine:
- ``ctx_setting`` / ``ctx_default``: optkg's setting for the prefill tokens one engine step schedules (the
  chunked-prefill budget: vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TensorRT-LLM
  ``--max_num_tokens``, which optkg's flag tables set as ``max_num_batched_tokens``) and the value assumed
  when the stack does not give or derive it;
- ``running_setting``: optkg's setting for the cap on running requests per scheduler (vLLM
  ``--max-num-seqs``, SGLang ``--max-running-requests``, TensorRT-LLM ``--max_batch_size``: all
  ``max_num_seqs`` in optkg's flag tables);
- ``admission``: how the scheduler holds KV for a running request: ``incremental`` (vLLM V1 allocates
  blocks step by step, kv_cache_manager.allocate_slots, and preempts when the pool runs out; SGLang reserves
  a decaying new_token_ratio share of the output) holds on average ``isl + osl / 2`` tokens per request in
  a closed loop; ``reserve`` (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler) admits a
  request only when ``isl + osl`` fit;
- ``parallel(values, techniques, is_moe)``: the estimator's ``tp_size, attention_dp_size, moe_tp_size,
  moe_ep_size`` and the number of schedulers (each with its own KV pool and running cap);
- ``auto_kv(model, hardware, derived)``: the KV format the engine stores for ``--kv-cache-dtype auto`` (after
  optkg's engine reading), as the estimator's ``kvcache_quant_mode``, with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Parallel:
    """A parallel layout as the speed estimator counts it."""

    tp_size: int            # attention TP per rank, as the estimator counts it
    pp_size: int
    attention_dp_size: int  # ranks each running its own batch (DP attention or DP replicas)
    moe_tp_size: int
    moe_ep_size: int
    gpus: int


def _i(v: dict[str, Any], k: str) -> int:
    try:
        return max(1, int(v.get(k) or 1))
    except (TypeError, ValueError):
        return 1


def _vllm(v: dict[str, Any], techniques: set[str], is_moe: bool) -> Parallel:
    # vLLM: -dp N runs N engine cores, each with its own scheduler and KV pool; for MoE the expert layers
    # form one group of dp x tp ranks, expert-parallel with --enable-expert-parallel, else tensor-parallel
    # (vLLM docs, Data Parallel Deployment / Expert Parallel Deployment).
    tp, pp, dp = _i(v, "tp_size"), _i(v, "pp_size"), _i(v, "dp_size")
    ep = bool(v.get("enable_expert_parallel")) or "expert-parallelism" in techniques
    moe_ep = tp * dp if (is_moe and ep) else 1
    return Parallel(tp, pp, dp, (tp * dp) // moe_ep, moe_ep, tp * pp * dp)


def _sglang(v: dict[str, Any], techniques: set[str], is_moe: bool) -> Parallel:
    # SGLang: --enable-dp-attention splits the TP group into dp attention ranks of tp / dp GPUs each
    # (ServerArgs._handle_data_parallelism); without it --dp N runs N replicas of tp GPUs. --ep-size E
    # shards experts over E ranks of the tp group, the rest tensor-parallel (moe_tp = tp / E).
    tp, pp, dp = _i(v, "tp_size"), _i(v, "pp_size"), _i(v, "dp_size")
    ep = _i(v, "ep_size") if is_moe else 1
    if "dp-attention" in techniques and dp > 1 and tp % dp == 0:
        return Parallel(tp // dp, pp, dp, max(1, tp // ep), ep, tp * pp)
    return Parallel(tp, pp, dp, max(1, tp // ep), ep, tp * pp * dp)


def _trtllm(v: dict[str, Any], techniques: set[str], is_moe: bool) -> Parallel:
    # TensorRT-LLM: enable_attention_dp makes each of the tp ranks an attention-DP rank; moe_expert_parallel_size
    # E shards experts, moe_tp = tp / E (tensorrt_llm/mapping.py).
    tp, pp = _i(v, "tp_size"), _i(v, "pp_size")
    ep = _i(v, "ep_size") if is_moe else 1
    if "dp-attention" in techniques or v.get("enable_dp_attention"):
        return Parallel(1, pp, tp, max(1, tp // ep), ep, tp * pp)
    return Parallel(tp, pp, 1, max(1, tp // ep), ep, tp * pp)


# SGLang 0.5.9 configs/model_config.py:54-66 is_deepseek_nsa: DeepSeek sparse attention (DSA) models
SGLANG_NSA_ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
                            "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM")
MODEL_DTYPE = ("bfloat16", "KV cache 'auto': the model's 16-bit dtype (timed so, not as the estimator's FP8 default "
                           "for FP8 / NVFP4 checkpoints)")


def _checkpoint_kv_fp8(model: Any) -> bool:
    """The checkpoint's quant config (ModelOpt hf_quant_config.json ``quantization`` or config.json) names
    ``kv_cache_quant_algo`` FP8."""
    qc = getattr(model, "quantization_config", None) or {}
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    return str(inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo") or "").upper() == "FP8"


def _vllm_auto_kv(model: Any, hardware: Any, derived: dict[str, Any]) -> tuple[str, str]:
    # optkg's vLLM reading resolves 'auto' to a checkpoint's KV format (kg.engines.vllm.kv_dtype) and records it
    ckpt = str(derived.get("kv_cache_dtype_checkpoint") or "")
    if not ckpt:
        return MODEL_DTYPE
    if ckpt.upper().endswith("FP8") or "compressed-tensors" in ckpt:
        return "fp8", f"KV cache 'auto': vLLM stores the checkpoint's format ({ckpt}) as FP8"
    from kg.speed.estimator import NotEvaluable
    raise NotEvaluable(f"KV cache 'auto': vLLM stores the checkpoint's format ({ckpt}), which has no estimator mode")


def _sglang_auto_kv(model: Any, hardware: Any, derived: dict[str, Any]) -> tuple[str, str]:
    # SGLang 0.5.9: DeepSeek sparse attention models FP8 from compute capability 10, BF16 below (server_args.py:
    # 1142-1143, called at :1264); else FP8 E4M3 when the quant config names kv_cache_quant_algo FP8
    # (model_executor/model_runner.py:1669-1683), else the model's dtype (:1687)
    nsa_architecture = getattr(model, "architecture", None) in SGLANG_NSA_ARCHITECTURES
    if nsa_architecture and getattr(model, "index_topk", None) is not None:
        from kg.derive.kv import compute_capability
        cc = compute_capability(hardware if isinstance(hardware, dict) else None)
        if cc is None:
            from kg.speed.estimator import NotEvaluable
            raise NotEvaluable("SGLang stores a DeepSeek-sparse-attention model's 'auto' KV cache as FP8 from compute "
                               "capability 10 and BF16 below, and the GPU's compute capability is not known")
        return ("fp8", "bfloat16")[cc < 10], (f"KV cache 'auto': SGLang stores this DeepSeek-sparse-attention model's "
                                              f"KV cache as {('FP8', 'BF16')[cc < 10]} on compute capability {cc:g} "
                                              "(sglang 0.5.9 server_args.py:1142-1143)")
    if _checkpoint_kv_fp8(model):
        return "fp8", "KV cache 'auto': the checkpoint's kv_cache_quant_algo FP8, which SGLang stores (0.5.9 " \
                      "model_runner.py:1669-1683)"
    return MODEL_DTYPE


def _trtllm_auto_kv(model: Any, hardware: Any, derived: dict[str, Any]) -> tuple[str, str]:
    # TensorRT-LLM: the checkpoint's ModelOpt kv_cache_quant_algo (hf_quant_config.json), else the model's dtype (not
    # pinned to a release: the TensorRT-LLM wheel was not read)
    if _checkpoint_kv_fp8(model):
        return "fp8", "KV cache 'auto': the checkpoint's kv_cache_quant_algo FP8, which TensorRT-LLM stores"
    return MODEL_DTYPE


# TensorRT-LLM AttentionDpConfig defaults (tensorrt_llm/llmapi/llm_args.py: enable_balance False, timeout_iters 50,
# batching_wait_iters 10; NVIDIA/TensorRT-LLM @ fcd3f3168, release not pinned: no wheel read)
TRTLLM_ADP_TIMEOUT_ITERS = 50
TRTLLM_ADP_BATCHING_WAIT_ITERS = 10


def adp_balance_hold_steps(ranks: int, running_per_rank: int, osl: int, timeout_iters: int,
                           batching_wait_iters: int) -> float:
    """Mean engine steps a request's prefill is held by TensorRT-LLM's attention-DP balancing in a closed loop.

    Mechanism (PyExecutor._balance_adp_requests, tensorrt_llm/_torch/pyexecutor/py_executor.py; documented in
    docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md @ 011cfc2cc, "Context Synchronization" and "Batch
    Equilibration"): with attention_dp_config.enable_balance, a context request is not scheduled until every rank
    has one; a counter shared by the ranks releases them after ``timeout_iters`` steps, and once every rank has
    one they wait ``batching_wait_iters`` further steps. Model: each rank's ``running_per_rank`` requests finish
    one per ``osl`` decode steps, so the next requests arrive at mu = running_per_rank / osl per rank and step;
    a hold opens at an arrival and lasts H = M + batching_wait_iters when M, the time until every other rank has
    an arrival too (P(M <= t) = (1 - e^(-mu t))^(ranks - 1)), is below ``timeout_iters``, else ``timeout_iters``. The opening request waits H, those arriving during it (rate ranks x mu) what is left of
    it: mean wait = (E[H] + ranks mu E[H^2] / 2) / (1 + ranks mu E[H])."""
    import math
    if ranks < 2 or running_per_rank < 1 or osl < 1:
        return 0.0
    mu, k, T, B = running_per_rank / osl, ranks - 1, float(timeout_iters), float(batching_wait_iters)
    F = lambda t: (1 - math.exp(-mu * t)) ** k  # noqa: E731  P(M <= t)
    # D = min(M, T): E[D] = int_0^T (1 - F), E[D^2] = int_0^T 2t (1 - F) (midpoint rule over the span where 1 - F is
    # not yet below e^-40, so a fast arrival rate is resolved as well as a slow one)
    span = min(T, (math.log(k) + 40) / mu)
    n = 2000
    ed = ed2 = 0.0
    for i in range(n):
        t = (i + 0.5) * span / n
        ed += (1 - F(t)) * span / n
        ed2 += 2 * t * (1 - F(t)) * span / n
    on_time = F(T)  # every rank had one before the timeout: the batching wait follows
    em_on_time = T * on_time - (T - ed)  # E[M; M < T] = T F(T) - int_0^T F
    eh = ed + B * on_time
    eh2 = ed2 + 2 * B * em_on_time + B * B * on_time
    lam = ranks * mu
    return (eh + lam * eh2 / 2) / (1 + lam * eh)


def batch_wait_hold_steps(running: int, osl: int, isl: int, max_num_tokens: int, timeout_iters: int,
                          max_tokens_ratio: float) -> float:
    """Mean engine steps a request's prefill is held by TensorRT-LLM's batch waiting in a closed loop.

    Mechanism (PyExecutor._schedule and _waiting_requests, tensorrt_llm/_torch/pyexecutor/py_executor.py, NVIDIA/
    TensorRT-LLM; release not pinned: no wheel read): without attention DP, while generation requests run, the
    scheduled context requests are held until ``batch_wait_timeout_iters`` held steps have passed or their prompt
    tokens plus the generation tokens reach ``batch_wait_max_tokens_ratio x max_num_tokens``; either value at 0 stops
    every wait (the test ``count >= 0`` or ``tokens >= 0`` holds at once). Model: the ``running`` requests finish one
    per ``osl`` decode steps, so prompts arrive at lam = running / osl per step; a hold opens at an arrival and lasts
    H = min(timeout, the time until k - 1 further prompts arrive), k the prompts of ``isl`` tokens that, with the
    ``running`` generation tokens, reach the token threshold (no hold when one does). The opening prompt waits H, those
    arriving during it what is left of it: mean wait = (E[H] + lam E[H^2] / 2) / (1 + lam E[H]), as
    ``adp_balance_hold_steps``."""
    if timeout_iters <= 0 or max_tokens_ratio <= 0 or running < 1 or osl < 1 or isl < 1:
        return 0.0
    k = math.ceil(max(0.0, max_tokens_ratio * max_num_tokens - running) / isl)
    if k <= 1:
        return 0.0
    lam, T = running / osl, float(timeout_iters)

    def later(t: float) -> float:  # P(fewer than k - 1 further arrivals by t): the hold is still open
        term = total = math.exp(-lam * t)
        for i in range(1, k - 1):
            term *= lam * t / i
            total += term
        return total
    n = 2000
    eh = eh2 = 0.0
    for i in range(n):
        t = (i + 0.5) * T / n
        eh += later(t) * T / n
        eh2 += 2 * t * later(t) * T / n
    return (eh + lam * eh2 / 2) / (1 + lam * eh)


def _trtllm_context_hold(values: dict[str, Any], par: Parallel, running_per_rank: int, osl: int, isl: int = 0,
                         max_num_tokens: int = 0) -> tuple[float, str]:
    if par.attention_dp_size < 2:
        t, ratio = int(values.get("batch_wait_timeout_iters") or 0), float(values.get("batch_wait_max_tokens_ratio") or 0)
        steps = batch_wait_hold_steps(running_per_rank, osl, isl, max_num_tokens, t, ratio)
        if not steps:
            return 0.0, ""
        return steps, (f"batch waiting: TensorRT-LLM holds prompts while requests decode, until batch_wait_timeout_iters "
                       f"{t} steps pass or they fill batch_wait_max_tokens_ratio {ratio:g} of max_num_tokens "
                       f"{max_num_tokens:,}: ~{steps:.1f} decode steps of wait added to TTFT")
    if not values.get("attention_dp_enable_balance"):
        return 0.0, ""
    t = values.get("attention_dp_timeout_iters")
    b = values.get("attention_dp_batching_wait_iters")
    t = TRTLLM_ADP_TIMEOUT_ITERS if t is None else int(t)
    b = TRTLLM_ADP_BATCHING_WAIT_ITERS if b is None else int(b)
    steps = adp_balance_hold_steps(par.attention_dp_size, running_per_rank, osl, t, b)
    return steps, (f"attention_dp_config.enable_balance: TensorRT-LLM holds a prompt until each of the "
                   f"{par.attention_dp_size} attention-DP ranks has one (at most timeout_iters {t} steps, then "
                   f"batching_wait_iters {b}): ~{steps:.1f} decode steps of wait added to TTFT")


def _sglang_context_hold(values: dict[str, Any], par: Parallel, running_per_rank: int, osl: int, isl: int = 0,
                         max_num_tokens: int = 0) -> tuple[float, str]:
    """SGLang's ``--scheduler-recv-interval k`` (k > 1): the scheduler takes new requests from the tokenizer only once
    its counter reaches k, each decode step adding 1 and any other step (a prefill) 1,000, so while it decodes a new
    prompt waits for the next poll, every k decode steps: k / 2 steps on average for a request arriving at a uniform
    point of the cycle (sglang 0.5.9 srt/managers/scheduler_recv_skipper.py:9-38, environ.py:232-235 the weights,
    managers/scheduler.py:1222-1227 the skip; the same in 0.5.3 and 0.5.5 scheduler_recv_skipper.py:13-37 and 0.5.23
    srt/managers/scheduler_components/recv_skipper.py:37-70). Default 1: no hold."""
    try:
        k = int(str(values.get("scheduler_recv_interval", 1)))
    except ValueError:
        return 0.0, ""
    if k <= 1:
        return 0.0, ""
    return k / 2, (f"--scheduler-recv-interval {k}: SGLang takes new requests once every {k} decode steps, so a prompt "
                   f"waits ~{k / 2:g} decode steps before its prefill, added to TTFT")


def _sglang_ctx_default(stack: Any, par: Parallel) -> tuple[int, str] | None:
    """SGLang's ``chunked_prefill_size`` when the launch does not give it: picked from the GPU's memory (kg.engines.sglang
    .memfrac.gpu_defaults, the buckets that also size its default mem_fraction_static: below 160 GiB 8,192 on H100 /
    H200, 16,384 above on B200), divided by the DP size under DP attention. The same H100 / H200 / B200 values at
    0.5.1 (srt/server_args.py:406-415, :538), 0.5.5 (:689-770, :1382) and 0.5.23 (srt/arg_groups/memory_hook.py:146-170,
    parallel_hook.py:326-331). None when the GPU's memory is not known."""
    from kg.derive.kv import gpu_memory_bytes
    from kg.engines.sglang.memfrac import MAX_PREFILL_TOKENS, gpu_defaults
    given = (getattr(stack, "settings", None) or {}).get("chunked_prefill_size")
    if isinstance(given, int) and given <= 0:
        # chunked prefill off: a prefill batch takes whole prompts up to --max-prefill-tokens (the scheduler's
        # rem_input_tokens; not divided under DP attention): sglang 0.5.23 srt/managers/scheduler.py:4157-4164,
        # managers/schedule_policy.py:883-890, arg_groups/fields/schedule.py:71-81
        mpt = (getattr(stack, "settings", None) or {}).get("max_prefill_tokens")
        budget = mpt if isinstance(mpt, int) and mpt > 0 else MAX_PREFILL_TOKENS
        src = "--max-prefill-tokens" if budget == mpt else "SGLang's default max_prefill_tokens"
        return budget, (f"chunked prefill off (chunked_prefill_size {given}): whole prompts up to {budget:,} tokens "
                        f"per prefill step ({src}; sglang 0.5.23 srt/managers/schedule_policy.py:883-890)")
    hw = stack.hardware if isinstance(stack.hardware, dict) else None
    mem = gpu_memory_bytes(hw) if hw else None
    if not mem:
        return None
    cps, _ = gpu_defaults(mem / 2**20, par.tp_size * par.attention_dp_size, getattr(stack, "engine_version", None))
    dp_attention = "dp-attention" in (stack.techniques or {}) and par.attention_dp_size > 1
    per_rank = max(1, cps // par.attention_dp_size) if dp_attention else cps
    split = f" / {par.attention_dp_size} DP-attention ranks = {per_rank:,}" if dp_attention else ""
    return per_rank, (f"chunked_prefill_size not given: SGLang's default for a GPU of {mem / 2**30:,.1f} GiB, {cps:,}"
                      f"{split} prefill tokens per step (sglang 0.5.5 srt/server_args.py:689-770)")


def _sglang_running_per_scheduler(seqs: int, par: Parallel, techniques: Any) -> tuple[int, str]:
    """SGLang's ``--max-running-requests`` is for the whole server: under DP attention each attention-DP rank (its own
    scheduler) gets ``max(1, N // dp)`` (sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3126-3129; 0.5.9
    srt/model_executor/model_runner.py:593-600; 0.5.5 srt/managers/tp_worker.py:281-289); DP replicas keep N each."""
    if "dp-attention" in (techniques or {}) and par.attention_dp_size > 1:
        per = max(1, seqs // par.attention_dp_size)
        return per, (f"--max-running-requests {seqs:,} is split over the {par.attention_dp_size} DP-attention ranks: "
                     f"{per:,} running per rank (sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3126-3129)")
    return seqs, ""


def ttft_queue_factors(batch: int, isl: int, ctx_tokens: int) -> tuple[float, float]:
    """(capped, uncapped) queueing factor aiconfigurator-core 0.12.0 multiplies one request's prefill time by for a
    TensorRT-LLM or SGLang TTFT (sdk/backends/base_backend.py:130-139 ``_ttft_queuing_factor``, applied at :1322):
    ``2 + (steps - 3) / 20`` prefill times, ``steps = ceil(isl x batch / ctx_tokens)`` the engine steps that
    prefill the whole batch (:1250), and capped at 4 (from 43 steps on). The slope is what a closed-loop benchmark
    of ``10 x concurrency`` prompts whose first ``concurrency`` arrive at once adds: that first wave waits on average
    half of its ``steps`` prefills, one request in ten, so steps / 20 per request (InferenceX
    benchmarks/dsr1_fp8_h200_trt.sh @ b30c3398a: ``--num-prompts $(( $CONC * 10 ))``); the cap stops that growth at
    43 running requests, though the first wave's wait keeps growing with it."""
    steps = math.ceil(isl * max(1, batch) / max(1, ctx_tokens))
    uncapped = 2 + (steps - 3) / 20
    return min(uncapped, 4.0), uncapped


def kv_tokens_per_request(admission: str, isl: int, osl: int) -> int:
    """KV tokens one running request holds under the engine's admission (see module doc)."""
    return isl + (osl if admission == "reserve" else osl // 2)


@dataclass(frozen=True)
class EngineMapping:
    """How one engine's settings reach the speed estimator: its context and running-request settings, its
    admission policy and its parallel layout."""

    ctx_setting: str
    ctx_default: int
    running_setting: str
    admission: str
    parallel: Callable[[dict[str, Any], set[str], bool], Parallel]
    auto_kv: Callable[[Any, Any, dict[str, Any]], tuple[str, str]]
    # engine steps a request's prefill is held by the scheduler before it runs (and the note saying so), from the
    # stack's settings, the layout, running requests per rank, OSL, ISL and the prefill token budget; None: none
    context_hold: Callable[..., tuple[float, str]] | None = None
    # the prefill budget the engine picks itself when the launch does not give ``ctx_setting`` (and the note saying
    # so), from the stack and its layout; None: ``ctx_default`` is assumed
    ctx_from_stack: Callable[[Any, Parallel], tuple[int, str] | None] | None = None
    # the running cap one scheduler gets from the given ``running_setting`` (and the note saying so), from the value,
    # the layout and the stack's techniques; None: the value is per scheduler as given
    running_per_scheduler: Callable[[int, Parallel, Any], tuple[int, str]] | None = None
    # the estimator's TTFT queueing factor is taken without its cap at 4 (``ttft_queue_factors``): TensorRT-LLM,
    # where leave-one-configuration-group-out on the train rows of every GPU cell lowered the TTFT error with it
    # (tools/accuracy/run.py; docs/speed-accuracy.md), SGLang's and vLLM's (its own log2 factor) keep the estimator's
    ttft_queue_uncapped: bool = False
    # ``context_hold`` is exact by the engine's source (SGLang's fixed poll period, k / 2 steps), so the calibration
    # fits TTFT less the held steps (tools/accuracy/run.py fit_pair); a modelled wait (TensorRT-LLM's attention-DP
    # balance and batch waiting) is left out of the TTFT fit instead: on the train rows, leave-one-group-out TTFT was
    # 30.4 % subtracted vs 67.3 % left out on sglang/b200, 21.8 vs 21.0 % on trtllm/b200, 20.2 vs 19.5 % on trtllm/h200
    context_hold_exact: bool = False


ENGINES: dict[str, EngineMapping] = {
    "vllm": EngineMapping("max_num_batched_tokens", 8192, "max_num_seqs", "incremental", _vllm, _vllm_auto_kv),
    "sglang": EngineMapping("chunked_prefill_size", 8192, "max_num_seqs", "incremental", _sglang, _sglang_auto_kv,
                            _sglang_context_hold, ctx_from_stack=_sglang_ctx_default,
                            running_per_scheduler=_sglang_running_per_scheduler, context_hold_exact=True),
    "trtllm": EngineMapping("max_num_batched_tokens", 8192, "max_num_seqs", "reserve", _trtllm, _trtllm_auto_kv,
                            _trtllm_context_hold, ttft_queue_uncapped=True),
}
