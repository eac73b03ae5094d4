"""Megatron's own memory arithmetic: the padded vocabulary and Megatron-LM's theoretical memory
footprint (``megatron/training/theoretical_memory_usage.py``), recomputed in exact fractions.

- **Vocabulary padding**: Megatron pads the vocabulary to a multiple of ``make_vocab_size_divisible_by
  x TP`` (``_vocab_size_with_padding``, megatron/training/tokenizer/tokenizer.py).
- **Megatron-LM** ``theoretical_memory_usage.py`` (NVIDIA/Megatron-LM @00caa53a, @d98e8a64): 18
  bytes/parameter (2 bf16 weights + 4 fp32 main grads + 12 Adam) or 6 + 12/DP with
  ``--use-distributed-optimizer``, on the most loaded shard ((layers/PP + embedding)/TP);
  activations from Korthikanti Table 2 with the MLP generalised (18 + 4·ffn/h) under SP + selective
  recompute, else ``s·b·h·(10 + 24/t)`` × 1.05.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

MIB = 2**20


def padded_vocab_size(vocab_size: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron pads the vocabulary to a multiple of ``make_vocab_size_divisible_by × tp``
    (megatron/training/tokenizer/tokenizer.py ``_vocab_size_with_padding``)."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab_size / multiple) * multiple)



@dataclass
class MegatronTheoretical:
    """Megatron-LM ``report_theoretical_memory`` values (bytes; ``*_mib`` as it prints them)."""

    weight_and_optimizer_bytes: Fraction
    activation_bytes: Fraction
    formula: str

    @property
    def total_bytes(self) -> Fraction:
        return self.weight_and_optimizer_bytes + self.activation_bytes

    def mib(self) -> dict[str, float]:
        return {"weight_and_optimizer": float(self.weight_and_optimizer_bytes / MIB),
                "activation": float(self.activation_bytes / MIB), "total": float(self.total_bytes / MIB)}


def megatron_theoretical_memory(shape: dict[str, Any], *, tp: int, pp: int, dp: int, seq_length: int,
                                micro_batch_size: int, padded_vocab: int, vpp: int | None = None,
                                num_microbatches: int | None = None, sequence_parallel: bool = False,
                                recompute_granularity: str = "none", distributed_optimizer: bool = False,
                                ep: int = 1, etp: int | None = None, world_size: int | None = None) -> MegatronTheoretical:
    """Megatron-LM's theoretical memory footprint (NVIDIA/Megatron-LM @d98e8a64, 2026-08-22,
    ``megatron/training/theoretical_memory_usage.py``), recomputed in exact fractions.

    Weight + optimizer on the most loaded shard: TP-sharded parameters (attention, dense MLP,
    shared experts) (block/PP + embedding)/TP (+ embedding/TP again when untied and PP = 1),
    replicated ones (norms, routers, final norm) /PP, routed experts /PP/(ETP·EP); × 18 bytes, or
    6 + 12/DP with the distributed optimizer (experts: 12/expert-DP, expert-DP = world/(ETP·EP·PP)).
    Activations (first pipeline stage): with SP and selective recompute ``s·b·h·(18 + 4·ffn/h)·L``,
    else ``s·b·h·(10 + 24/t)·L``; plus ``8·s·b·PP`` (embedding input) and ``s·b·h·PP`` (embedding
    dropout); × the interleaving penalty or min(1, m/PP); plus the output layer when PP = 1; then
    ``/t`` (SP branch) or ``× 1.05``. MLA, MTP and hybrid models are not modelled here.
    """
    h, L, a = shape["hidden_size"], shape["num_layers"], shape["num_attention_heads"]
    g = shape.get("num_query_groups") or a
    d = shape.get("kv_channels") or h // a
    f = shape.get("ffn_hidden_size") or 4 * h
    norm = 1 if shape.get("normalization", "RMSNorm") == "RMSNorm" else 2
    gl = Fraction(3, 2) if shape.get("swiglu") else Fraction(1)
    E = shape.get("num_experts") if (shape.get("num_experts") or 0) > 1 else None
    n_moe = shape.get("num_moe_layers", L) if E else 0
    n_dense = L - n_moe
    attn = Fraction(2 * h * h) * (1 + Fraction(g, a)) * Fraction(d * a, h)
    dense_mlp = 2 * h * f * gl
    shared = 2 * h * (shape.get("moe_shared_expert_intermediate_size") or 0) * gl
    routed = 2 * h * (shape.get("moe_ffn_hidden_size") or 0) * (E or 0) * gl
    ln = 2 * h * norm
    router = h * E if E else 0
    emb = h * padded_vocab
    tp_block = (attn + dense_mlp) * n_dense + (attn + shared) * n_moe
    rep_block = ln * n_dense + (ln + router) * n_moe + norm * h
    exp_block = routed * n_moe
    etp = etp or tp
    tp_shard = (tp_block / pp + emb) / tp
    if shape.get("untie_embeddings_and_output_weights", True) and pp == 1:
        tp_shard += Fraction(emb, tp)
    rep_shard = rep_block / pp
    exp_shard = exp_block / pp / (etp * ep)
    world = world_size or tp * pp * dp

    def per_param(n: int) -> Fraction:
        return Fraction(18) if not distributed_optimizer else 6 + Fraction(12, n)
    w_o = (tp_shard + rep_shard) * per_param(dp) + exp_shard * per_param(max(1, world // (etp * ep * pp)))
    s, b = seq_length, micro_batch_size
    sbh = s * b * h
    with_sp = sequence_parallel and recompute_granularity == "selective"
    if with_sp:
        act = Fraction(sbh) * (18 + 4 * Fraction(f, h)) * L
        formula = "s*b*h*(18 + 4*ffn/h) per layer (Korthikanti Table 2, SP + selective), /TP"
    else:
        act = Fraction(sbh) * (10 + Fraction(24, tp)) * L
        formula = "s*b*h*(10 + 24/t) per layer (Korthikanti Table 2, TP without SP), x1.05"
        if sequence_parallel:  # Megatron-LM takes its SP formula only with selective recompute (:466 at d98e8a64)
            formula = ("s*b*h*(10 + 24/t) per layer, x1.05: Megatron-LM's without-SP formula, which it applies to an "
                       f"SP job unless recompute is selective (here: {recompute_granularity}; "
                       "theoretical_memory_usage.py:466)")
    act += 8 * s * b * pp + sbh * pp
    if vpp is not None:
        act *= 1 + Fraction(pp - 1, pp * vpp)
    elif pp > 1 and num_microbatches is not None:
        act *= min(Fraction(1), Fraction(num_microbatches, pp))
    if pp == 1:
        if with_sp:
            act += Fraction(sbh) * 4 * (1 + Fraction(padded_vocab, h))
        else:
            act += (Fraction(s * b * padded_vocab, tp) + sbh) * 2
    act = act / tp if with_sp else act * Fraction(105, 100)
    return MegatronTheoretical(w_o, act, formula)



def theoretical_cross_check(job: Any, shape: dict[str, Any], par: dict[str, int]) -> dict[str, Any]:
    """What Megatron-LM's report_theoretical_memory prints for the job's arguments (MiB), and its formula."""
    mbs = job.get("micro_batch_size") or 1
    nmb = job.get("global_batch_size") // (mbs * par["dp_size"]) if job.get("global_batch_size") else None
    r = megatron_theoretical_memory(
        shape, tp=par["tp_size"], pp=par["pp_size"], dp=par["dp_size"], seq_length=job.get("seq_length"),
        micro_batch_size=mbs, padded_vocab=padded_vocab_size(shape.get("vocab_size") or 0, par["tp_size"],
                                                             job.get("make_vocab_size_divisible_by", 128)),
        vpp=job.get("vpp_size") or None, num_microbatches=nmb, sequence_parallel=bool(job.get("sequence_parallel")),
        recompute_granularity=job.get("recompute_granularity", "none"),
        distributed_optimizer=bool(job.get("distributed_optimizer")), ep=par["ep_size"], etp=job.get("etp_size") or None,
        world_size=par["world_size"])
    return {"weight_and_optimizer_bytes": round(r.weight_and_optimizer_bytes), "activation_bytes": round(r.activation_bytes),
            "verdict": theoretical_verdict(job, par),
            "weight_and_optimizer_mib": round(float(r.weight_and_optimizer_bytes / MIB), 2),
            "activation_mib": round(float(r.activation_bytes / MIB), 2), "total_mib": round(float(r.total_bytes / MIB), 2),
            "formula": r.formula,
            "source": "NVIDIA/Megatron-LM@d98e8a64 megatron/training/theoretical_memory_usage.py (recomputed)"}


_SAME_WEIGHTS = "weights and optimizer: the same 18 (or 6 + 12/DP) bytes per parameter on the same shard in both; "


def theoretical_verdict(job: Any, par: dict[str, int]) -> str:
    """Which accounting matches the job's flags where Megatron-LM's file and this report differ, and why."""
    verdict = _activation_verdict(job, par)
    if par["cp_size"] > 1 and job.get("distributed_optimizer"):
        return (f"weights and optimizer: this report's; Megatron-LM's file divides optimizer states by DP "
                f"{par['dp_size']} (it has no CP), megatron-core 0.16.1 shards them over DP x CP = "
                f"{par['dp_size'] * par['cp_size']} (intra_dp_cp_group, optimizer/__init__.py:637); " +
                verdict.removeprefix(_SAME_WEIGHTS))
    return verdict


def _activation_verdict(job: Any, par: dict[str, int]) -> str:
    sp, recompute = bool(job.get("sequence_parallel")), job.get("recompute_granularity", "none")
    if recompute == "full":
        return ("activations: this report's; Megatron-LM's file has no full-recompute branch and counts every "
                "layer's stored activations (theoretical_memory_usage.py:466 picks only SP + selective or the "
                "without-SP formula), while --recompute-granularity full keeps only each layer's input")
    if sp and recompute != "selective":
        return ("activations: this report's; Megatron-LM's file applies its without-SP formula s*b*h*(10 + 24/t) x 1.05 "
                "to this SP job because recompute is not selective (theoretical_memory_usage.py:466), so it does not "
                "divide the norm and dropout activations by TP as --sequence-parallel does")
    if not sp and par["tp_size"] > 1 and recompute == "none":
        return ("activations: this report's; Megatron-LM's without-SP formula s*b*h*(10 + 24/t) is Korthikanti's "
                "selective-recompute row, so with recompute none it leaves out the attention scores unless flash "
                "attention is on")
    return (_SAME_WEIGHTS + "activations: both Korthikanti Table 2 (SP + selective), Megatron-LM writing the SwiGLU MLP as 4*ffn/h "
            "where this report counts its three ffn-wide tensors (6*f/h)")

