"""Training memory per GPU: model states, activations, pipeline in-flight micro-batches, batch sizes.

Units: bytes (ints, rounded down only at the end), GB = 1e9 bytes, MiB = 2**20, GiB = 2**30 bytes. Each function
names the accounting it follows, because published estimators count differently:

- **ZeRO paper** (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
  Parameter Models", §5 and Figure 1): mixed-precision Adam keeps 2Ψ fp16 weights, 2Ψ fp16
  gradients and KΨ optimizer states (K = 12: fp32 master weights, momentum, variance).
  Per GPU: baseline (2 + 2 + K)Ψ; P_os 2Ψ + 2Ψ + KΨ/N_d; P_os+g 2Ψ + (2 + K)Ψ/N_d;
  P_os+g+p (2 + 2 + K)Ψ/N_d.
- **the framework's own estimators**, recomputed in its package: DeepSpeed's ZeRO-2/3
  ``estimate_*_model_states_mem_needs`` (kg.frameworks.deepspeed.memory), Megatron-LM's
  ``theoretical_memory_usage.py`` (kg.frameworks.megatron.memory); shown beside this breakdown.
- **Korthikanti et al. 2022** ("Reducing Activation Recomputation in Large Transformer Models",
  Table 2 and §4): activation bytes per layer ``s·b·h·(34 + 5·a·s/h)`` without parallelism;
  ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` with TP; ``s·b·h/t·(34 + 5·a·s/h)`` with TP + SP;
  ``s·b·h·(10 + 24/t)`` TP + selective; ``34·s·b·h/t`` TP + SP + selective; ``2·s·b·h`` (``/t`` with
  SP) with full recompute. The 1F1B schedule keeps PP micro-batches in flight on the first stage,
  so it holds L/PP × PP = L layers' activations (§4.2.3); the interleaved schedule multiplies this
  by 1 + (PP − 1)/(PP·VPP) (Narayanan et al. 2021 §2.2, as Megatron-LM computes it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kg.core.errors import OptkgError
from kg.frameworks.registry import get as framework_of

GB = 10**9
MIB = 2**20
GIB = 2**30
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# optimizer state bytes per parameter *excluding* the fp32 master copy (mixed precision keeps one
# more fp32 copy: 4 bytes). Adam/AdamW: momentum + variance (ZeRO paper §3.1: K = 4 + 4 + 4 = 12);
# SGD with momentum and Lion: one fp32 state; Adafactor: factored second moment (~0 per parameter).
OPTIMIZER_STATE_BYTES = {"adam": 8, "adamw": 8, "fusedadam": 8, "cpuadam": 8, "deepspeedcpuadam": 8, "onebitadam": 8,
                         "zerooneadam": 8, "lamb": 8, "onebitlamb": 8, "adagrad": 4, "sgd": 4, "sgd-no-momentum": 0, "lion": 4, "muon": 4,
                         "adafactor": 0, "rmsprop": 4, "ademamix": 12,
                         # low-bit states (HF Trainer --optim, kg.frameworks.hf_trainer.reader.trainer_optimizer): one byte
                         # per state for bitsandbytes 8-bit (blockwise, bitsandbytes optim/optimizer.py), half for torchao's
                         # AdamW4bit
                         "adamw-8bit": 2, "adamw-4bit": 1, "lion-8bit": 1, "rmsprop-8bit": 1, "ademamix-8bit": 3}


# ---------------------------------------------------------------------------------------------
# model states: the published formulas, exactly

def zero_paper_model_states(psi: int, n_d: int, stage: int, k: int = 12) -> Fraction:
    """Bytes per GPU of weights + gradients + optimizer states, ZeRO paper Figure 1.

    ``psi`` parameters, ``n_d`` data-parallel degree, ``stage`` 0 (baseline), 1 (P_os), 2 (P_os+g),
    3 (P_os+g+p), ``k`` optimizer bytes per parameter (12 for mixed-precision Adam).
    Raises OptkgError for a stage outside 0-3 or a non-positive ``n_d``.
    """
    if stage not in (0, 1, 2, 3) or n_d < 1:
        raise OptkgError(f"ZeRO stage must be 0-3 and N_d >= 1, found stage {stage}, N_d {n_d}")
    p, n = Fraction(psi), Fraction(n_d)
    return {0: (4 + k) * p, 1: 4 * p + k * p / n, 2: 2 * p + (2 + k) * p / n, 3: (4 + k) * p / n}[stage]



# ---------------------------------------------------------------------------------------------
# activations: Korthikanti et al. 2022

def korthikanti_activation_bytes_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False,
                                           recompute: str = "none") -> Fraction:
    """Activation bytes one transformer layer stores for the backward pass (Table 2 and §4).

    ``s`` sequence length (tokens), ``b`` micro-batch size, ``h`` hidden size, ``a`` attention
    heads, ``t`` tensor-parallel size, ``sp`` sequence parallelism, ``recompute`` none, selective
    (attention core recomputed: the 5·a·s/h term goes) or full (only the layer input is kept).
    16-bit activations, 1-byte dropout masks, MLP of 4h, as in the paper.
    """
    if recompute not in ("none", "selective", "full"):
        raise OptkgError(f"recompute must be none, selective or full, found {recompute!r}")
    sbh = Fraction(s * b * h)
    score = Fraction(5 * a * s, h) if recompute == "none" else Fraction(0)
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    if sp:
        return sbh / t * (34 + score)
    if t == 1:
        return sbh * (34 + score)
    return sbh * (10 + Fraction(24, t) + score / t)


def in_flight_microbatches(pp: int, vpp: int | None = None, num_microbatches: int | None = None) -> Fraction:
    """Micro-batches' worth of first-stage activations held at the peak of the pipeline schedule.

    1F1B (PipeDream-flush): ``min(pp, m)`` (Korthikanti §4.2.3; Megatron discounts by
    min(1, m/pp)). Interleaved with ``vpp`` chunks per rank: ``pp × (1 + (pp − 1)/(pp × vpp))``
    (Megatron-LM ``theoretical_memory_usage.py``, "interleaved schedule memory penalty").
    """
    if pp <= 1:
        return Fraction(1)
    if vpp and vpp > 1:
        return pp * (1 + Fraction(pp - 1, pp * vpp))
    return Fraction(min(pp, num_microbatches)) if num_microbatches else Fraction(pp)


# ---------------------------------------------------------------------------------------------
# parameters (Megatron's counting: no biases, no router, GQA projections)


@dataclass
class ParamCounts:
    """Parameter counts (elements) of a decoder-only transformer, Megatron's accounting."""

    dense_layer: int
    moe_layer: int
    moe_layer_experts: int      # routed-expert share of one MoE layer
    num_dense_layers: int
    num_moe_layers: int
    embedding: int              # one h x V matrix (padded V)
    final_norm: int
    untied: bool

    @property
    def block(self) -> int:
        return self.dense_layer * self.num_dense_layers + self.moe_layer * self.num_moe_layers + self.final_norm

    @property
    def total(self) -> int:
        return self.block + (2 if self.untied else 1) * self.embedding

    @property
    def largest_layer(self) -> int:
        return max(self.dense_layer if self.num_dense_layers else 0, self.moe_layer if self.num_moe_layers else 0,
                   self.embedding)


def param_counts(shape: dict[str, Any], padded_vocab: int) -> ParamCounts:
    """Count parameters from a Megatron-named ``shape`` (see kg.inputs.training.job.TrainingJob.shape).

    Attention ``2·h·d·(a + g)`` (Q and output of a·d, K and V of g·d), MLP ``2·h·f`` or ``3·h·f``
    with SwiGLU, two norms of ``h`` (RMSNorm) or ``2h`` (LayerNorm); the same formula as
    Megatron-LM ``compute_weight_and_optimizer_memory``. Raises OptkgError naming a missing field.
    """
    for k in ("num_layers", "hidden_size", "num_attention_heads"):
        if not shape.get(k):
            raise OptkgError(f"model shape: '{k}' is not known (give a model config or --{k.replace('_', '-')})")
    h, L, a = shape["hidden_size"], shape["num_layers"], shape["num_attention_heads"]
    g = shape.get("num_query_groups") or a
    d = shape.get("kv_channels") or h // a
    f = shape.get("ffn_hidden_size") or 4 * h
    norm = 1 if shape.get("normalization", "RMSNorm") == "RMSNorm" else 2
    gl = Fraction(3, 2) if shape.get("swiglu") else Fraction(1)
    attn = 2 * h * d * (a + g)
    dense = int(2 * h * (f * gl + norm)) + attn
    n_moe = 0
    moe = experts = 0
    if shape.get("num_experts") and shape["num_experts"] > 1:
        n_moe = shape.get("num_moe_layers", L)
        fe = shape.get("moe_ffn_hidden_size") or f
        shared = shape.get("moe_shared_expert_intermediate_size") or 0
        experts = int(2 * h * fe * shape["num_experts"] * gl)
        moe = experts + int(2 * h * (shared * gl + norm)) + attn
    return ParamCounts(dense, moe, experts, L - n_moe, n_moe, h * padded_vocab, norm * h,
                       bool(shape.get("untie_embeddings_and_output_weights", True)))


# ---------------------------------------------------------------------------------------------
# optkg's breakdown for a training job

@dataclass
class TrainingMemory:
    """Per-GPU memory of the most loaded rank (first pipeline stage), bytes, with its accounting."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    activation_per_layer: int
    layers_on_stage: int
    in_flight_microbatches: float
    params_per_gpu: int
    total_params: int
    accounting: list[str] = field(default_factory=list)
    cpu_bytes: int = 0
    working_buffer: int = 0
    counts: ParamCounts | None = None   # the parameter counts sized (for the frameworks' own estimators)
    params_resident: int | None = None  # parameters held between uses after ZeRO-3/FSDP sharding (None: not sharded)
    shard_group: int = 1
    stage: str = "first pipeline stage"  # the pipeline stage sized (the most loaded one)

    @property
    def model_states(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.working_buffer

    @property
    def total(self) -> int:
        return self.model_states + self.activations

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights, "gradients_bytes": self.gradients, "optimizer_bytes": self.optimizer,
                "working_buffer_bytes": self.working_buffer, "model_states_bytes": self.model_states,
                "activations_bytes": self.activations, "activation_bytes_per_layer": self.activation_per_layer,
                "layers_on_first_stage": self.layers_on_stage,
                "in_flight_microbatches": self.in_flight_microbatches, "params_per_gpu": self.params_per_gpu,
                "total_params": self.total_params, "cpu_offload_bytes": self.cpu_bytes,
                "params_resident_per_gpu": self.params_resident, "shard_group": self.shard_group,
                "total_bytes": self.total, "stage": self.stage, "accounting": list(self.accounting)}


def activation_bytes_per_layer(shape: dict[str, Any], s: int, b: int, t: int, sp: bool, recompute: str,
                               flash: bool, elem: int = 2) -> Fraction:
    """Korthikanti Table 2 per layer, with the MLP generalised to ``ffn`` (and SwiGLU's two FFN-wide
    inputs) and ``s`` the tokens on this rank (sequence / CP).

    Attention ``11·s·b·h`` (+ ``5·a·s²·b`` scores unless flash/fused attention or selective
    recompute), MLP ``s·b·h·(3 + 4·f/h)`` (GeLU: input, activation input, fc2 input, dropout mask)
    or ``s·b·h·(3 + 6·f/h)`` (SwiGLU saves gate and up), two norms ``4·s·b·h``; the TP-sharded
    parts ``/t``; with SP all of it ``/t``; full recompute keeps ``2·s·b·h`` (``/t`` with SP).
    The paper's tensors are 16-bit: ``elem`` 4 (float32 training) doubles each of them, the 1-byte
    dropout masks stay.
    """
    h, a = shape["hidden_size"], shape["num_attention_heads"]
    f = shape.get("ffn_hidden_size") or 4 * h
    sbh = Fraction(s * b * h)
    k = Fraction(elem, 2)  # the paper's 2-byte tensors in the activations' dtype
    if recompute == "full":
        return 2 * k * sbh / (t if sp else 1)
    mlp_inner = (6 if shape.get("swiglu") else 4) * Fraction(f, h)
    # sharded by TP: Q,K (4), V (2), attention output (2) of attention; fc1 output/activation of MLP
    sharded = (8 + mlp_inner) * k
    # QKV input, attn dropout mask (1 B), MLP input, MLP dropout mask (1 B), norms
    replicated = (2 + 2 + 4) * k + 1 + 1
    # scores: softmax output and dropout output (2 + 2) and the dropout mask (1 B)
    score = (4 * k + 1) * Fraction(a * s, h) if (recompute == "none" and not flash) else Fraction(0)
    if sp:
        return sbh / t * (replicated + sharded + score)
    return sbh * (replicated + (sharded + score) / t)


def stage_layers(L: int, pp: int, first: int | None, last: int | None, rank: int) -> int:
    """Decoder layers pipeline rank ``rank`` builds (megatron-core 0.16.1 transformer_block.py:75-146,
    get_num_layers_to_build): the given first / last stage counts, the rest split evenly over the other stages."""
    if pp <= 1:
        return L
    if first is None and last is None:
        return math.ceil(L / pp)
    if rank == 0 and first is not None:
        return first
    if rank == pp - 1 and last is not None:
        return last
    left = pp - (first is not None) - (last is not None)
    return (L - (first or 0) - (last or 0)) // left if left > 0 else 0


def training_memory(job: Any) -> TrainingMemory:
    """Per-GPU memory of ``job`` on its most loaded rank: the first pipeline stage, or with uneven first / last stages
    (Megatron's --decoder-first/last-pipeline-num-layers) whichever of the first, second and last stage needs most.
    Under 1F1B rank r holds min(PP - r, m) micro-batches (megatron-core 0.16.1 pipeline_parallel/schedules.py:2093-2096:
    PP - r - 1 warm-up micro-batches, then one in the steady state), so a middle stage with more layers than the
    first can hold more; the last stage keeps the output layer and the fp32 logits."""
    g = job.get
    pp = job.parallel()["pp_size"]
    first, last = g("num_layers_in_first_pipeline_stage"), g("num_layers_in_last_pipeline_stage")
    base = _stage_memory(job, 0)
    if pp <= 1 or (first is None and last is None) or (g("vpp_size") or 1) > 1:
        return base
    cands = [base] + [_stage_memory(job, r) for r in sorted({1, pp - 1})]
    best = max(cands, key=lambda m: m.total)
    if best is not base:
        gib = 2**30
        best.accounting.append(
            f"most loaded stage: {best.stage} of PP {pp} ({best.layers_on_stage} layers x "
            f"{best.in_flight_microbatches:g} micro-batches in flight, {best.total / gib:.2f} GiB) over the first "
            f"stage ({base.layers_on_stage} x {base.in_flight_microbatches:g}, {base.total / gib:.2f} GiB): 1F1B holds "
            "min(PP - rank, m) micro-batches per rank (megatron-core 0.16.1 pipeline_parallel/schedules.py:2093-2096)")
    return best


def _stage_memory(job: Any, rank: int) -> TrainingMemory:
    """Per-GPU memory of ``job`` (a kg.inputs.training.job.TrainingJob) on its most loaded rank.

    Model states: weights (params_dtype bytes), gradients (Megatron fp32 main grads: 4 bytes;
    others the params dtype), fp32 master + optimizer states (``OPTIMIZER_STATE_BYTES``), sharded
    by ZeRO stage / distributed optimizer / FSDP strategy over the sharding group, moved to CPU by
    offload (as DeepSpeed's estimators do). Parameters on the first stage: (block/PP + embedding)
    /TP with routed experts also /EP (Megatron's most-loaded shard). Activations:
    ``activation_bytes_per_layer`` × layers on the first stage × in-flight micro-batches
    (``in_flight_microbatches``). Raises OptkgError when the model shape or seq_length is unknown.
    """
    g = job.get
    shape = job.shape()
    par = job.parallel()
    tp, pp, cp, ep, dp = par["tp_size"], par["pp_size"], par["cp_size"], par["ep_size"], par["dp_size"]
    if not g("seq_length"):
        raise OptkgError("training memory: seq_length is not known (give --seq-length / seq_len)")
    fw = framework_of(job.framework)
    vocab = shape.get("vocab_size") or 0
    padded = fw.padded_vocab(vocab, tp, job)
    pc = param_counts(shape, padded)
    acc: list[str] = []
    if not vocab:
        acc.append("vocabulary size not known (give --vocab-size, --tokenizer-model or a model): the embedding, "
                   "output layer and logits are not counted, so the total is low")
    # parameters on the most loaded rank
    L = shape["num_layers"]
    layers_first = stage_layers(L, pp, g("num_layers_in_first_pipeline_stage"), g("num_layers_in_last_pipeline_stage"),
                                rank)
    is_last = pp > 1 and rank == pp - 1
    n_moe_first = round(pc.num_moe_layers * layers_first / L) if L else 0
    n_dense_first = layers_first - n_moe_first
    expert_share = pc.moe_layer_experts * n_moe_first
    other = pc.dense_layer * n_dense_first + (pc.moe_layer - pc.moe_layer_experts) * n_moe_first
    emb_first = pc.embedding * (2 if (pc.untied and pp == 1) else 1) + (pc.final_norm if pp == 1 else 0)
    if rank:
        # a later stage: no input embedding; the last keeps the final norm and the output layer (a copy of the word
        # embeddings when tied, megatron-core shared_embedding_or_output_weight)
        emb_first = pc.embedding + pc.final_norm if is_last else 0
    # routed experts are split over ETP x EP (megatron-core 0.16.1: ETP defaults to TP,
    # model_parallel_config.py:413-414; the framework says, kg/frameworks/protocol.py expert_tp); the rest over TP
    etp = fw.expert_tp(job, par)
    expert_params = Fraction(expert_share, ep * etp)
    params = int(Fraction(other + emb_first, tp) + expert_params)
    words = fw.wording()
    acc.append(words["params"] + (f" (ETP {etp})" if expert_share and etp != tp else ""))
    if rank:
        acc[-1] = acc[-1].replace("layers of the first stage + embedding", f"layers of pipeline stage {rank}"
                                  + (" + output layer" if is_last else ""))
    wbytes = DTYPE_BYTES[g("params_dtype", "bf16")]
    mixed = wbytes < 4
    gbytes = DTYPE_BYTES[g("grad_dtype", fw.grad_dtype_default(job))]
    opt = str(g("optimizer", "adam")).lower()
    obytes = OPTIMIZER_STATE_BYTES.get(opt, 8) + (4 if mixed else 0)
    peft = g("peft")
    trainable = params
    if peft:
        # LoRA trains r x (in + out) per adapted matrix; optimizer/gradients of the base model vanish.
        r = g("lora_rank", 8)
        h = shape["hidden_size"]
        trainable = int(r * 2 * h * 4 * layers_first / tp)  # q,k,v,o adapters (PEFT default targets)
        acc.append(f"PEFT {peft}: gradients and optimizer states only for ~{trainable:,} adapter parameters "
                   "(rank r, q/k/v/o, 2·h·r each)")
    weights = params * wbytes
    grads = trainable * gbytes
    optim = trainable * obytes
    if opt.endswith("-8bit") and not peft and not rank:
        # the HF Trainer keeps nn.Embedding weights at 32-bit states (transformers 5.24.0 trainer.py:1328-1338,
        # GlobalOptimManager override optim_bits 32): the input embedding on the first stage
        emb = int(Fraction(pc.embedding, tp))
        full = OPTIMIZER_STATE_BYTES[opt.removesuffix("-8bit")] + (4 if mixed else 0)
        optim += emb * (full - obytes)
        acc.append(f"{opt}: the input embedding ({emb:,} parameters) keeps 32-bit states, {full} B per parameter "
                   "(transformers trainer.py:1328-1338)")
    acc.append(f"model states: {wbytes} B weights + {gbytes} B gradients + {obytes} B optimizer ({opt}"
               f"{', incl. 4 B fp32 master' if mixed else ''}) per parameter")
    # sharding: what the framework partitions over which group
    zero = g("zero_stage", 0) or 0
    sharding = fw.sharding(job, dp)
    level, group = sharding.level, sharding.group
    if level >= 1 and "world_size" in job.unknown:
        raise OptkgError("the model states are sharded over the data-parallel group, whose size the unknown GPU "
                         "count sets (give --count)")
    acc.extend(sharding.lines)
    buffer = 0
    dense_group = sharding.dense_group or group
    expert_group = sharding.expert_group or dense_group
    efsdp = sharding.expert_shard_group
    n_exp = int(expert_params)
    apart = bool(efsdp and efsdp != group and not peft)  # routed experts FSDP-sharded over their own group
    if apart and level >= 1:
        # torchtitan's efsdp mesh for the experts, the rest over ``group``
        optim = (trainable - n_exp) * obytes // group + n_exp * obytes // efsdp
        if level >= 2:
            grads = (trainable - n_exp) * gbytes // group + n_exp * gbytes // efsdp
        if level >= 3:
            weights = (params - n_exp) * wbytes // group + n_exp * wbytes // efsdp
    elif level >= 1 and (dense_group, expert_group) != (group, group) and not peft:
        # Megatron's distributed optimizer: dense states over DP x CP, expert states over expert-DP
        optim = (trainable - n_exp) * obytes // dense_group + n_exp * obytes // expert_group
    elif level >= 1:
        optim = optim // group
    if level >= 2 and not apart:
        grads = grads // group
    if level >= 3:
        if not apart:
            weights = weights // group
        buffer = fw.gathered_unit_params(pc, shape) * wbytes // tp
        acc.append("ZeRO-3/FSDP: + one gathered unit (largest layer) in the params dtype")
    cpu = 0
    if g("offload_optimizer", "none") != "none":
        cpu += optim + grads * 2  # fp32 gradient copy lives with the optimizer on the host
        optim = 0
        acc.append(f"optimizer offload ({g('offload_optimizer')}): optimizer states and fp32 grads "
                   f"{'on NVMe (the host keeps pinned buffers)' if g('offload_optimizer') == 'nvme' else 'on the host'} "
                   "(DeepSpeed estimators: GPU keeps 2Ψ)")
        fsdp_offload = bool(g("fsdp_sharding")) and g("offload_param", "none") != "none"
        if fsdp_offload:
            # FSDP's CPUOffload(offload_params=True) / FSDP2 CPUOffloadPolicy, which accelerate builds from
            # fsdp_offload_params (accelerate 1.15.0 utils/dataclasses.py:2180-2191): "this offloads gradients to CPU
            # as well, meaning that the optimizer step runs on CPU" (torch/distributed/fsdp/api.py CPUOffload)
            acc.append("FSDP CPU offload: the sharded gradients go to the host with the parameters "
                       "(torch FSDP CPUOffload(offload_params=True))")
        grads = 0 if zero or fsdp_offload else grads
    if g("offload_param", "none") != "none":
        cpu += weights
        weights = 0
        acc.append(f"parameter offload ({g('offload_param')}): weights "
                   f"{'on NVMe' if g('offload_param') == 'nvme' else 'on the host'}, GPU keeps the gathered unit")
    resident = (params - n_exp) // group + n_exp // efsdp if apart else params // group
    # activations
    s = g("seq_length") // cp
    b = g("micro_batch_size", 1) or 1
    sp = bool(g("sequence_parallel")) or fw.implies_sequence_parallel(job, tp)
    recompute = g("recompute_granularity", "none")
    flash = g("use_flash_attn", True)
    act_shape = dict(shape)
    if pc.num_moe_layers and shape.get("moe_router_topk"):
        # a MoE layer's MLP activations: each token passes top-k experts (+ the shared expert), so the
        # FFN width that stores activations is topk x moe_ffn (+ shared); EP moves tokens, not their count
        moe_ffn = shape["moe_router_topk"] * (shape.get("moe_ffn_hidden_size") or 0) + \
            (shape.get("moe_shared_expert_intermediate_size") or 0)
        dense_ffn = shape.get("ffn_hidden_size") or 4 * shape["hidden_size"]
        act_shape["ffn_hidden_size"] = Fraction(moe_ffn * pc.num_moe_layers + dense_ffn * pc.num_dense_layers,
                                                pc.num_moe_layers + pc.num_dense_layers)
        acc.append(f"MoE: {pc.num_moe_layers} layers store activations for top-{shape['moe_router_topk']} experts "
                   f"x {shape.get('moe_ffn_hidden_size')} per token")
    elem = DTYPE_BYTES[g("params_dtype", "bf16")]  # the activations' dtype: float32 training stores 4 B
    per_layer = activation_bytes_per_layer(act_shape, s, b, tp, sp, recompute, flash, elem)
    vpp = g("vpp_size")
    m = None
    if g("global_batch_size") and b:
        m = g("global_batch_size") // (b * dp) or None
    elif g("gradient_accumulation_steps"):
        m = g("gradient_accumulation_steps")
    inflight = in_flight_microbatches(pp - rank, vpp, m) if rank else in_flight_microbatches(pp, vpp, m)
    acts = per_layer * layers_first * inflight
    if recompute == "full":
        # the layer being recomputed holds its full activations once
        acts += activation_bytes_per_layer(act_shape, s, b, tp, sp, "selective", flash, elem)
    # embedding output (dropout mask + output) on the first stage; logits on the last when PP = 1
    if not rank:
        acts += Fraction(s * b * shape["hidden_size"] * (1 + elem) * (inflight if pp > 1 else 1), tp if sp else 1)
    if (pp == 1 or is_last) and padded:
        acts += Fraction(4 * s * b * padded, tp)  # fp32 logits for the loss (Megatron: 4·s·b·V/t)
    acc.append(f"activations: Korthikanti et al. 2022 Table 2 per layer ({'SP' if sp else 'no SP'}, "
               f"recompute {recompute}, {'flash/fused attention' if flash else 'attention scores stored'}"
               f"{', float32: its 2-byte tensors at 4 B' if elem == 4 else ''}), "
               f"s = {g('seq_length')}/{cp} CP, x {layers_first} layers x {float(inflight):g} micro-batches in flight"
               f" ({words['schedule_interleaved'] if vpp and vpp > 1 else words['schedule'] if pp > 1 else 'no pipeline'})")
    stage = "first pipeline stage" if not rank else "last pipeline stage" if is_last else f"pipeline stage {rank}"
    return TrainingMemory(int(weights), int(grads), int(optim), int(acts), int(per_layer), layers_first,
                          float(inflight), params, pc.total, acc, int(cpu), int(buffer), pc,
                          resident if level >= 3 else None, group if level >= 1 else 1, stage)


# ---------------------------------------------------------------------------------------------
# llm-analysis's accounting of the same job, side by side (issue 16)

@dataclass
class LlmAnalysisActivations:
    """llm-analysis 0.2.2's activation bytes for a job (``LLMAnalysis.training``, analysis.py), per term.

    ``per_layer`` (attention, MLP, norms, each per layer) x ``layers`` (all L: it takes the first stage to
    hold p micro-batches of L/p layers), plus ``extras`` (output logits and the final norm), which it adds
    twice at micro batch 1 (analysis.py:1974-1987 builds the batch-size-1 total with them, then :2031-2039
    adds them again)."""

    attention: Fraction
    mlp: Fraction
    norms: Fraction
    layers: int
    logits: Fraction
    final_norm: Fraction
    extras_counted: int

    @property
    def per_layer(self) -> Fraction:
        return self.attention + self.mlp + self.norms

    @property
    def total(self) -> int:
        return int(self.per_layer * self.layers + (self.logits + self.final_norm) * self.extras_counted)


def llm_analysis_activations(job: Any) -> LlmAnalysisActivations | None:
    """What llm-analysis 0.2.2 (``pip install llm-analysis==0.2.2``) counts as activations per GPU for ``job``,
    with its defaults: activations in the params dtype (2 B), LayerNorm inputs in fp32
    (``layernorm_dtype_bytes=BYTES_FP32``, analysis.py:1840), flash attention (``flash_attn=True``: it stores
    the attention output 2·s·b·h and softmax statistics 4·a·s·b again, at 2 B, /t), attention dropout mask,
    no MLP dropout mask (``with_dropout=False``), ``sp_size`` = TP with sequence parallelism else 1. Its MLP is
    two matrices h x ffn with ``expansion_ratio`` = ffn/h; a SwiGLU MLP (three matrices h x f) is given to it
    with the same parameter count, ffn = 1.5·f (the only way it takes Llama-3.1-70B, whose f = 3.5·h fails
    its ``ffn % h == 0`` check). Output logits (unpadded vocabulary x s x b x 2 B /t) are counted on the first
    stage whatever the PP size. Dense models only; None for MoE, context parallelism or offloaded
    activations (not modelled by it the way optkg does).
    """
    shape, par, g = job.shape(), job.parallel(), job.get
    if (shape.get("num_experts") or 0) > 1 or par["cp_size"] > 1 or not g("seq_length"):
        return None
    h, a, L = shape["hidden_size"], shape["num_attention_heads"], shape["num_layers"]
    f = shape.get("ffn_hidden_size") or 4 * h
    expansion = Fraction(3 * f, 2 * h) if shape.get("swiglu") else Fraction(f, h)
    s, b, t = g("seq_length"), g("micro_batch_size", 1) or 1, par["tp_size"]
    sp = t if g("sequence_parallel") else 1
    sbh = Fraction(s * b * h)
    recompute = g("recompute_granularity", "none")
    logits = Fraction(shape.get("vocab_size") or 0) * s * b * 2 / t
    if recompute == "full":  # FULL: the layer input, /t (analysis.py get_activation_memory_per_layer)
        attn, mlp, norms, final = 2 * sbh / t, Fraction(0), Fraction(0), Fraction(0)
    else:
        attn = (sbh / sp + 4 * sbh / t) * 2 + sbh / sp  # QKV input, Q/K/V/out, attention dropout mask
        if recompute != "selective":  # flash attention: output and softmax statistics, 2 B each
            attn += (2 * sbh + 4 * a * s * b) * 2 / t
        mlp = 2 * sbh / sp + 4 * expansion * sbh / t  # fc1 input; activation input and fc2 input
        norms = 2 * 4 * sbh / sp
        final = 4 * sbh / sp
    return LlmAnalysisActivations(attn, mlp, norms, L, logits, final, 2 if b == 1 else 1)


# ---------------------------------------------------------------------------------------------
# batch arithmetic

def batch_arithmetic(job: Any) -> dict[str, Any]:
    """global = micro × grad-accum × DP (DeepSpeed ``_batch_assertion``; Megatron
    ``num_microbatches = global / (micro × DP)``); tokens per step = global × seq_length.

    Returns the given and derived values; ``batch_consistent`` is False when all three are given
    and do not multiply out (DeepSpeed asserts; Megatron asserts divisibility).
    """
    g = job.get
    dp = job.parallel()["dp_size"]
    mbs, gas, gbs = g("micro_batch_size"), g("gradient_accumulation_steps"), g("global_batch_size")
    out: dict[str, Any] = {"dp_size": dp}
    if mbs and gas and not gbs:
        gbs = mbs * gas * dp
    if mbs and gbs and not gas:
        gas = gbs // (mbs * dp) if gbs % (mbs * dp) == 0 else None
        out["gbs_divisible"] = gbs % (mbs * dp) == 0
    if mbs and gbs and gas:
        out["expected_global_batch_size"] = mbs * gas * dp
        out["batch_consistent"] = mbs * gas * dp == gbs
    out.update({"micro_batch_size": mbs, "gradient_accumulation_steps": gas, "global_batch_size": gbs})
    if gbs and g("seq_length"):
        out["tokens_per_step"] = gbs * g("seq_length")
    return out
