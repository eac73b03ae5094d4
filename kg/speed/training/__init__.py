"""Training speed: step time, tokens/s per GPU and MFU of a training job, and where the time goes.

One step of a job with micro-batch ``b``, ``m`` micro-batches per pipeline, TP ``t``, PP ``p``, CP ``c``, DP ``d``:

    step = m x (compute + exposed TP + exposed CP + pipeline p2p) x (1 + bubble)
           + m x exposed FSDP/ZeRO-3 gathers + exposed gradient reduction + optimizer update

- **compute** per micro-batch and GPU: the hardware FLOPs of kg.speed.training.flops (model FLOPs plus what
  recomputation runs again) over ``t x p x c`` GPUs, GEMMs at the precision's dense tensor-core peak times a
  per-GPU efficiency, the core attention at the BF16 peak times the attention efficiency, plus the
  element-wise traffic (norms, activations, residuals, dropout: ``k`` bytes per token, hidden unit and layer
  pass) at the HBM bandwidth. The framework's kernels scale both efficiencies (``SpeedTraits.kernels``).
- **communication**, bytes per GPU from the layout, at the link the group spans (NVLink within the GPU's NVLink
  domain, else the network: one NIC per GPU, and as many NICs as the ring has ranks in a node, see
  ``_link``; catalog/hardware): TP ``8 (t-1)/t`` micro-batch activations per layer
  (2 all-gathers + 2 reduce-scatters forward, the same backward; 4 more per fully recomputed layer), CP the
  ring's K/V ``3 (c-1)`` times per layer (forward K/V, backward K/V and their gradients), pipeline p2p one
  activation and one gradient per stage boundary, DP the gradient reduce-scatter + parameter all-gather of
  the distributed optimizer (an all-reduce without it) once per step, FSDP / ZeRO-3 two all-gathers and a
  reduce-scatter per micro-batch (one all-gather for SHARD_GRAD_OP / ZeRO-2). Ring collectives move
  ``(n-1)/n`` of the buffer per GPU (Patarasuk & Yuan 2009). Overlapped communication is exposed by a
  fitted fraction; communication that nothing overlaps is exposed whole.
- **bubble**: ``(p - 1) / (m x v)`` of the pipeline's compute (Narayanan et al. 2021 §2.2; kg.analyses.
  training computes it).

The efficiencies and exposed fractions are data with provenance: kg/speed/training/constants.yaml, fitted on the train
split of published rows (tools/accuracy/training_rows.yaml) by tools/accuracy/training_speed.py --fit; the held-out
rows are scored by tests/test_training_speed_published.py and docs/training-speed-accuracy.md. A GPU,
precision or framework the fit has no row for is "not evaluable", never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from kg.speed.training.flops import forward_flops

CONSTANTS = Path(__file__).with_name("constants.yaml")
GRAD_REDUCE_BYTES = 2      # gradients reduced in BF16 (Megatron DDP grad_reduce_in_fp32 defaults to False)
PARAM_GATHER_BYTES = 2     # BF16 parameters all-gathered after the distributed optimizer's update


class SpeedNotEvaluable(Exception):
    """The job's step time cannot be estimated; ``str(e)`` says which fact or calibration is missing."""


def constants() -> dict[str, Any]:
    """kg/speed/training/constants.yaml as plain data (served from the content-keyed cache)."""
    from kg.core.cache import built_from

    def build():
        import yaml
        return yaml.safe_load(CONSTANTS.read_text(encoding="utf-8")) or {}
    return built_from("speed-training-constants", [CONSTANTS], build)


@dataclass
class StepInputs:
    """Everything the step model reads, as plain numbers (built once per job by ``step_inputs``)."""

    framework: str
    kernels: str
    gpu: str
    precision: str                 # "bf16", "fp8" or "mxfp8": the GEMMs' tensor-core precision
    world: int
    tp: int
    pp: int
    cp: int
    dp: int
    vpp: int
    micro_batch: int
    microbatches: int
    seq: int
    hidden: int
    layers: int
    ffn: int
    heads: int
    fused_attention: bool
    kv_width: int                  # query groups x head dim
    gemm_fwd_per_layer: float      # FLOPs of one micro-batch
    attention_fwd_per_layer: float
    logits_fwd: float
    full_recompute_fraction: float
    selective_recompute: bool
    selective_gemm_recompute: float
    params_per_gpu: float          # parameters on one GPU before ZeRO/FSDP sharding
    shard_group: int               # GPUs the model states are sharded over (1: replicated)
    shard_level: int               # 0 replicated, 1 optimizer (distributed optimizer / ZeRO-1), 2, 3
    fsdp_gathers: int              # all-gathers + reduce-scatters per micro-batch (FSDP / ZeRO-3: 3, ZeRO-2 FSDP: 2)
    fsdp_reduce_bytes: int         # bytes per gradient the reduce-scatter moves (SpeedTraits: torchtitan float32, 4)
    tp_overlap: bool
    dp_overlap: bool
    compiled: bool
    bubble: float
    peak_gemm: float               # FLOP/s
    peak_bf16: float
    hbm: float                     # bytes/s
    nvlink: float                  # bytes/s per direction per GPU
    network: float                 # bytes/s per GPU
    domain: int                    # GPUs one NVLink domain joins
    power_scale: float             # (power limit / TDP), 1 at the rated power
    model_flops_per_step: float
    hardware_flops_per_step: float
    notes: list[str] = field(default_factory=list)


def _precision(job: Any) -> str:
    if job.get("fp8"):
        return "mxfp8" if job.get("fp8_recipe") == "mxfp8" else "fp8"
    return "bf16"


def _peak(hw: Mapping[str, Any], precision: str) -> float | None:
    key = {"bf16": "bf16_dense_tflops", "fp8": "fp8_dense_tflops", "mxfp8": "fp8_dense_tflops"}[precision]
    v = hw.get(key)
    if v is None and precision == "bf16":
        v = hw.get("fp16_dense_tflops")
    return float(v) * 1e12 if v else None


def step_inputs(job: Any, derived: Mapping[str, Any]) -> StepInputs:
    """The numbers of ``job`` (kg.inputs.training.job.TrainingJob) the step model needs; ``derived``: the
    training analysis' derived values (its ``pipeline`` bubble). Raises SpeedNotEvaluable naming what is
    missing."""
    from kg.derive.training_memory import param_counts
    from kg.frameworks.registry import get as framework_of
    fw = framework_of(job.framework)
    traits = fw.speed_backend
    if traits is None:
        raise SpeedNotEvaluable(f"no step-time model for framework {job.framework!r} (its package maps none)")
    if "pp_size" in job.unknown:
        raise SpeedNotEvaluable("the pipeline size is unknown")
    shape = job.shape()
    if not (shape.get("num_layers") and shape.get("hidden_size") and shape.get("num_attention_heads")):
        raise SpeedNotEvaluable("the model shape is not known (give a model config or --num-layers/--hidden-size)")
    if shape.get("vocab_size") is None:
        raise SpeedNotEvaluable("the vocabulary size is not known")
    seq, mbs = job.get("seq_length"), job.get("micro_batch_size")
    if not seq:
        raise SpeedNotEvaluable("seq_length is not given")
    if not mbs:
        raise SpeedNotEvaluable("micro_batch_size is not given")
    hw = job.hardware
    if not hw:
        raise SpeedNotEvaluable("no GPU given")
    par = job.parallel()
    tp, pp, cp, dp, world = par["tp_size"], par["pp_size"], par["cp_size"], par["dp_size"], par["world_size"]
    if tp * pp * cp * dp != world:
        raise SpeedNotEvaluable(f"TP x PP x CP = {tp * pp * cp} does not divide the world size {world}")
    gbs, gas = job.get("global_batch_size"), job.get("gradient_accumulation_steps")
    if gbs:
        m = gbs // (mbs * dp)
    elif gas:
        m, gbs = gas, gas * mbs * dp
    else:
        raise SpeedNotEvaluable("neither global_batch_size nor gradient_accumulation_steps is given")
    if m < 1:
        raise SpeedNotEvaluable(f"global batch {gbs} is smaller than micro batch {mbs} x DP {dp}")
    if (shape.get("num_experts") or 0) > 1:
        raise SpeedNotEvaluable("mixture-of-experts models: no published MoE row calibrates the expert GEMMs and "
                                "the all-to-all yet")
    if job.model is not None and getattr(job.model, "is_mla", False):
        raise SpeedNotEvaluable("multi-latent attention FLOPs are not modelled")
    if job.get("peft"):
        raise SpeedNotEvaluable(f"{job.get('peft')}: frozen weights skip their weight-gradient GEMMs; the step model "
                                "times full training only")
    off = [k for k in ("offload_optimizer", "offload_param") if (job.get(k) or "none") != "none"]
    if off:
        raise SpeedNotEvaluable(f"{', '.join(off)}: host offload traffic is not modelled")
    if job.get("params_dtype") == "fp32":
        raise SpeedNotEvaluable("FP32 training: catalog/hardware gives no TF32 tensor-core peak")
    precision = _precision(job)
    peak, peak_bf16 = _peak(hw, precision), _peak(hw, "bf16")
    if not peak or not peak_bf16:
        raise SpeedNotEvaluable(f"{hw.get('id')} has no dense {precision.upper()} tensor-core peak in catalog/hardware")
    for k in ("hbm_bandwidth_tbps", "interconnect_bandwidth_gbps"):
        if not hw.get(k):
            raise SpeedNotEvaluable(f"{hw.get('id')}: catalog/hardware gives no {k}")
    vocab = fw.padded_vocab(shape["vocab_size"], tp, job)
    fl = forward_flops(shape, seq, vocab)
    L = shape["num_layers"]
    rc = job.get("recompute_granularity", "none") or "none"
    full = 0.0
    if rc == "full":
        k = job.get("recompute_num_layers") or 0
        v = job.get("vpp_size") or 1
        full = min(1.0, k * pp * v / L) if k else 1.0
    sel = rc == "selective"
    counts = param_counts(shape, vocab)
    params_per_gpu = counts.total / (tp * pp)
    sh = fw.sharding(job, dp)
    level, group = sh.level, max(1, sh.group)
    fsdp = job.get("fsdp_sharding")
    gathers = 0
    if level >= 3:
        gathers = 3
    elif level == 2 and fsdp:
        gathers = 2  # SHARD_GRAD_OP: one all-gather forward, a reduce-scatter backward, per micro-batch
    bubble = (derived.get("pipeline") or {}).get("bubble_fraction") or 0.0
    model_flops = fl.model * gbs
    extra = (full * (fl.gemm_per_layer + fl.attention_per_layer) * L
             + (fl.attention if sel else 0.0) + (traits.selective_gemm_recompute * fl.gemm_per_layer * L if sel else 0.0))
    nvl = float(hw["interconnect_bandwidth_gbps"]) * 1e9 / 2  # the catalog's NVLink figure counts both directions
    net = float(hw.get("network_bandwidth_gbps_per_gpu") or 0) * 1e9
    power = 1.0
    if hw.get("power_limit_w") and hw.get("tdp_w"):
        power = min(1.0, float(hw["power_limit_w"]) / float(hw["tdp_w"]))
    return StepInputs(
        framework=job.framework, kernels=traits.kernels, gpu=str(hw.get("id")), precision=precision, world=world,
        tp=tp, pp=pp, cp=cp, dp=dp, vpp=job.get("vpp_size") or 1, micro_batch=mbs, microbatches=m, seq=seq,
        hidden=shape["hidden_size"], layers=L, heads=shape["num_attention_heads"],
        ffn=int(shape.get("ffn_hidden_size") or 4 * shape["hidden_size"]),
        fused_attention=job.get("use_flash_attn") is not False,
        kv_width=(shape.get("num_query_groups") or shape["num_attention_heads"]) *
                 (shape.get("kv_channels") or shape["hidden_size"] // shape["num_attention_heads"]),
        gemm_fwd_per_layer=fl.gemm_per_layer * mbs, attention_fwd_per_layer=fl.attention_per_layer * mbs,
        logits_fwd=fl.logits * mbs, full_recompute_fraction=full, selective_recompute=sel,
        selective_gemm_recompute=traits.selective_gemm_recompute, params_per_gpu=params_per_gpu, shard_group=group,
        shard_level=level, fsdp_gathers=gathers, fsdp_reduce_bytes=traits.fsdp_reduce_bytes,
        tp_overlap=bool(job.get("tp_comm_overlap", traits.tp_overlap)),
        dp_overlap=bool(job.get("overlap_grad_reduce", traits.dp_overlap)),
        compiled=bool(job.get("torch_compile", False)), bubble=float(bubble), peak_gemm=peak, peak_bf16=peak_bf16,
        hbm=float(hw["hbm_bandwidth_tbps"]) * 1e12, nvlink=nvl, network=net,
        domain=int(hw.get("nvlink_domain_size") or hw.get("gpus_per_node") or 8), power_scale=power,
        model_flops_per_step=model_flops, hardware_flops_per_step=model_flops + extra * gbs)


def _link(x: StepInputs, span: int, stride: int = 0) -> tuple[float, str]:
    """(bytes/s, name) of the slowest link a ring collective over a group crosses: the group's ranks are
    ``stride`` apart within ``span`` consecutive ranks (``stride`` 0: a point-to-point send, one NIC).

    A ring that leaves the NVLink domain crosses between domains once per channel, and NCCL runs one channel
    per NIC: with ``g`` of the group's ranks in each domain, each with its own NIC (catalog/hardware gives
    the network bandwidth per GPU), the ring's bus bandwidth is ``g`` NICs' worth, capped by NVLink. NCCL's
    authors: "DGX-1 can get 48 GB/s because we have 4 IB adapters instead of 1" (12.5 GB/s each;
    NVIDIA/nccl-tests#29), and 46-48 GB/s per 400 Gb/s NIC on two H100 nodes (NVIDIA/nccl-tests#290)."""
    if span <= x.domain:
        return x.nvlink, "NVLink"
    if not x.network:
        raise SpeedNotEvaluable(f"{x.gpu}: a group of {span} GPUs leaves the NVLink domain and catalog/hardware "
                                "gives no network bandwidth per GPU")
    nics = max(1, x.domain // stride) if stride else 1
    if nics == 1:
        return x.network, "network"
    return min(x.nvlink, x.network * nics), f"network, {nics} NICs per node"


def efficiency(k: Mapping[str, Any], x: StepInputs) -> tuple[float, float, float, str]:
    """(GEMM efficiency, kernel factor, attention-kernel factor, where from) for ``x``'s GPU, precision and framework kernels."""
    table = k.get("gemm_efficiency") or {}
    gpu = x.gpu
    seen = set()
    while isinstance(table.get(gpu), Mapping) and table[gpu].get("same_as") and gpu not in seen:
        seen.add(gpu)
        gpu = table[gpu]["same_as"]
    e = (table.get(gpu) or {}).get("fp8" if x.precision == "mxfp8" else x.precision)
    if e is not None and x.precision == "mxfp8":
        e = e * float(k.get("mxfp8_factor", 1.0))  # MX block scaling's cost relative to per-tensor FP8 scaling
    if e is None:
        raise SpeedNotEvaluable(f"no published training row calibrates {x.gpu} {x.precision.upper()} GEMMs "
                                "(kg/speed/training/constants.yaml gemm_efficiency)")
    kern = (k.get("kernels") or {}).get(x.kernels)
    if kern is None:
        raise SpeedNotEvaluable(f"no published training row calibrates the {x.kernels} kernels (kg/speed/training/constants.yaml)")
    factor = kern.get("compiled" if x.compiled and "compiled" in kern else "eager", 1.0)
    where = f"{x.gpu} {x.precision.upper()}" + (f" (as {gpu})" if gpu != x.gpu else "")
    return float(e), float(factor), float(kern.get("attention", 1.0)), where


def attention_efficiency(k: Mapping[str, Any], x: StepInputs) -> float:
    """The core attention kernels' fraction of the BF16 peak on ``x``'s GPU (``attention`` under its
    gemm_efficiency entry)."""
    table = k.get("gemm_efficiency") or {}
    gpu, seen = x.gpu, set()
    while isinstance(table.get(gpu), Mapping) and table[gpu].get("same_as") and gpu not in seen:
        seen.add(gpu)
        gpu = table[gpu]["same_as"]
    e = (table.get(gpu) or {}).get("attention")
    if e is None:
        raise SpeedNotEvaluable(f"no published training row calibrates {x.gpu}'s attention kernels")
    return float(e)


def step_time(x: StepInputs, k: Mapping[str, Any]) -> dict[str, Any]:
    """Seconds per step and its terms (see module doc) for inputs ``x`` and constants ``k``.

    Overlapped communication hides behind the compute it runs beside, never more: its exposed time is
    ``max(f x comm, comm - window)`` with ``f`` the fitted exposed fraction and the window the compute of the
    same micro-batch (TP, CP, FSDP) or of the last micro-batch's backward pass (gradient reduction)."""
    e_gemm, kern, kern_attn, where = efficiency(k, x)
    power = x.power_scale ** float(k.get("power_exponent", 1.0))
    e_attn = attention_efficiency(k, x)
    L = x.layers
    div = x.tp * x.pp * x.cp
    rc_g = x.full_recompute_fraction + (x.selective_gemm_recompute if x.selective_recompute else 0.0)
    rc_a = x.full_recompute_fraction + (1.0 if x.selective_recompute else 0.0)
    gemm = ((3 + rc_g) * x.gemm_fwd_per_layer * L + 3 * x.logits_fwd) / div
    attn = (3 + rc_a) * x.attention_fwd_per_layer * L / div
    # GEMMs narrower per GPU run further below peak (tile and wave quantisation): efficiency x n / (n + n0)
    # with n the hidden size per TP rank
    n = x.hidden / x.tp
    size = n / (n + float(k.get("gemm_half_width", 0.0)))
    t_gemm = gemm / (x.peak_gemm * e_gemm * size * kern * power)
    t_attn = attn / (x.peak_bf16 * e_attn * kern_attn * power)
    passes = 3 + x.full_recompute_fraction
    elem = float(k["elementwise_bytes"]) * x.micro_batch * x.seq * x.hidden * L * passes
    if x.precision != "bf16":
        # FP8 GEMM inputs are cast (read BF16, write FP8, amax): per token and layer the inputs of the QKV,
        # output, MLP-in and MLP-out GEMMs, forward and (gradients) backward
        elem += float(k.get("fp8_cast_bytes", 0.0)) * x.micro_batch * x.seq * (3 * x.hidden + x.ffn) * L * passes
    if not x.fused_attention:
        # unfused attention writes and reads the s x s scores: softmax, mask and dropout over a x s^2 x b
        # elements per layer (Korthikanti et al. 2022 Table 2 stores 5 a s^2 b bytes of them; each is written
        # and read again: 10 bytes per element forward, twice that backward)
        elem += 10 * x.heads * x.seq * (x.seq / x.cp) * x.micro_batch * L * (3 + rc_a)
    t_elem = elem / div / x.hbm
    compute = t_gemm + t_attn + t_elem
    act = x.micro_batch * (x.seq / x.cp) * x.hidden * 2  # one micro-batch's activations on a CP rank, bytes
    comm: list[dict[str, Any]] = []
    link_eff = float(k.get("link_efficiency", 1.0))
    exp = k.get("exposed") or {}
    hide = float(k.get("overlap_window", 1.0))

    def add(kind: str, volume: float, span: int, fraction: float | None, window: float, per: str,
            stride: int = 0) -> float:
        bw, name = _link(x, span, stride)
        raw = volume / (bw * link_eff)
        secs = raw if fraction is None else max(fraction * raw, raw - hide * window)
        comm.append({"kind": kind, "bytes": volume, "per": per, "link": name, "link_bytes_per_s": bw,
                     "overlapped": fraction is not None, "seconds": secs, "seconds_if_serial": raw})
        return secs

    t_tp = t_cp = t_pp = 0.0
    if x.tp > 1:
        vol = (8 + 4 * x.full_recompute_fraction) * (x.tp - 1) / x.tp * act * L / x.pp
        t_tp = add("TP", vol, x.tp, float(exp["tp_overlapped"]) if x.tp_overlap else None, t_gemm, "micro-batch", 1)
    if x.cp > 1:
        vol = 3 * (x.cp - 1) * 2 * x.micro_batch * (x.seq / x.cp) * x.kv_width * 2 / x.tp * L / x.pp
        t_cp = add("CP", vol, x.tp * x.cp, float(exp["cp"]), t_attn, "micro-batch", x.tp)
    if x.pp > 1:
        vol = 2 * x.vpp * act / x.tp
        t_pp = add("PP", vol, x.tp * x.cp * x.dp + 1, None, 0.0, "micro-batch")
    per_mb = compute + t_tp + t_cp + t_pp
    pipeline = x.microbatches * per_mb * (1 + x.bubble)
    span_dp = x.tp * x.cp * x.shard_group
    t_fsdp = t_dp = 0.0
    if x.fsdp_gathers and x.shard_group > 1:
        # (gathers - 1) BF16 all-gathers of the parameters and one reduce-scatter of the gradients in the framework's
        # reduce dtype
        vol = ((x.fsdp_gathers - 1) * 2 + x.fsdp_reduce_bytes) * (x.shard_group - 1) / x.shard_group * x.params_per_gpu
        t_fsdp = x.microbatches * add("FSDP/ZeRO-3", vol, span_dp, float(exp["fsdp"]) if x.dp_overlap else None,
                                      compute, "micro-batch", x.tp * x.cp)
    elif x.dp > 1:
        d = x.dp
        if x.shard_level >= 1:
            vol = (d - 1) / d * x.params_per_gpu * (GRAD_REDUCE_BYTES + PARAM_GATHER_BYTES)
        else:
            vol = 2 * (d - 1) / d * x.params_per_gpu * GRAD_REDUCE_BYTES
        t_dp = add("DP", vol, x.tp * x.cp * d, float(exp["dp_overlapped"]) if x.dp_overlap else None,
                   compute * 2 / 3, "step", x.tp * x.cp)
    shard = x.shard_group if x.shard_level >= 1 else 1
    t_opt = float(k["optimizer_bytes_per_param"]) * x.params_per_gpu / shard / x.hbm
    step = pipeline + t_fsdp + t_dp + t_opt
    m = x.microbatches
    terms = {"gemm": m * t_gemm, "attention": m * t_attn, "elementwise": m * t_elem, "tp": m * t_tp, "cp": m * t_cp,
             "pp_p2p": m * t_pp, "bubble": m * per_mb * x.bubble, "fsdp": t_fsdp, "dp": t_dp, "optimizer": t_opt}
    return {"step_s": step, "terms": terms, "communication": comm, "gemm_efficiency": e_gemm, "kernel_factor": kern,
            "attention_efficiency": e_attn * kern_attn, "efficiency_from": where, "power_factor": power}


def training_speed(job: Any, derived: Mapping[str, Any], k: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Speed section of a training report: ``{"evaluable": True, step_time_s, tokens_per_s_per_gpu, mfu,
    ...}`` or ``{"evaluable": False, "reason": ...}`` (see module doc)."""
    k = constants() if k is None else k
    try:
        x = step_inputs(job, derived)
        r = step_time(x, k)
    except SpeedNotEvaluable as e:
        return {"evaluable": False, "reason": str(e)}
    step = r["step_s"]
    gbs = x.microbatches * x.micro_batch * x.dp
    tok = gbs * x.seq / step
    model_tflops = x.model_flops_per_step / step / x.world / 1e12
    peak_name = {"bf16": "FP16" if job.get("params_dtype") == "fp16" else "BF16", "fp8": "FP8", "mxfp8": "FP8"}[x.precision]
    return {
        "evaluable": True, "step_time_s": step, "tokens_per_s": tok, "tokens_per_s_per_gpu": tok / x.world,
        "model_tflops_per_gpu": model_tflops, "mfu": x.model_flops_per_step / step / x.world / x.peak_gemm,
        "hfu": x.hardware_flops_per_step / step / x.world / x.peak_gemm,
        "mfu_peak": f"dense {peak_name} peak {x.peak_gemm / 1e12:,.0f} TFLOPS of {x.gpu}",
        "flops": {"model_per_step": x.model_flops_per_step, "hardware_per_step": x.hardware_flops_per_step,
                  "source": "Megatron-LM training.py num_floating_point_operations (core_v0.16.1:220); "
                            "Narayanan et al. 2021 eq. 2; recomputation: Korthikanti et al. 2022 §5"},
        "layout": {"tp": x.tp, "pp": x.pp, "cp": x.cp, "dp": x.dp, "vpp": x.vpp, "micro_batch": x.micro_batch,
                   "microbatches": x.microbatches, "global_batch": gbs, "precision": x.precision},
        "terms": r["terms"], "communication": r["communication"], "bubble_fraction": x.bubble,
        "constants": {"gemm_efficiency": r["gemm_efficiency"], "efficiency_from": r["efficiency_from"],
                      "kernels": x.kernels, "kernel_factor": r["kernel_factor"],
                      "attention_efficiency": r["attention_efficiency"], "power_factor": r["power_factor"],
                      "source": k.get("source", "")},
        "notes": list(x.notes)}
