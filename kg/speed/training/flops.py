"""Training FLOPs of a decoder-only transformer: what one step computes, as the frameworks count it.

Model FLOPs (the numerator of MFU) follow Megatron-LM's own accounting, ``num_floating_point_operations``
in ``megatron/training/training.py`` (core_v0.16.1, lines 220-400, ``transformer_flops``): every GEMM runs
three times (forward, backward data gradient, backward weight gradient), a GEMM of an m x n by n x k matrix is
2mnk operations, and per token and layer

- attention projections ``6 · h · (q + 2 · kv)`` and the output projection ``6 · q · h`` (q = heads x head dim,
  kv = query groups x head dim: GQA),
- the core attention ``6 · q · s`` (QK^T and the weighted sum of V, each over half of the causal s x s mask),
- the MLP ``6 · h · f · 3`` with SwiGLU (two stacked input matrices), ``6 · h · f · 2`` otherwise; an MoE layer
  runs ``top_k`` routed experts of ``moe_ffn_hidden_size`` plus its shared expert,
- the logits ``6 · h · V`` (V the padded vocabulary).

This is Narayanan et al. 2021 (arXiv:2104.04473) eq. 2 ("6N + attention"), generalised to GQA, SwiGLU and MoE,
with the causal halving Megatron adopted later. Hardware FLOPs add what recomputation runs again (Korthikanti
et al. 2022, arXiv:2205.05198 §5): full recomputation one more forward pass of the recomputed layers,
selective recomputation the forward core attention (Megatron) and, for frameworks that also recompute
GEMMs in selective mode, that share of the forward GEMMs.

The older accountings some published tables were computed with are here too, so their TFLOP/s figures can be
turned back into tokens/s exactly: Megatron-core r0.8.0's formula (full, not causal, attention; no
recomputation) and Narayanan et al. 2021 eq. 3 (recomputation included, GPT MLP of 4h).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class StepFlops:
    """Forward FLOPs of one sequence of ``seq`` tokens, split by where they run: ``gemm`` (projections,
    MLP, logits: the precision's tensor cores), ``attention`` (the core attention: BF16 flash kernels), and
    ``layers`` / ``gemm_per_layer`` / ``attention_per_layer`` / ``logits`` for recomputation of some layers."""

    gemm_per_layer: float        # averaged over dense and MoE layers
    attention_per_layer: float
    logits: float
    layers: int

    @property
    def gemm(self) -> float:
        return self.gemm_per_layer * self.layers + self.logits

    @property
    def attention(self) -> float:
        return self.attention_per_layer * self.layers

    @property
    def model(self) -> float:
        """Model FLOPs of forward + backward (3x the forward), Megatron's accounting."""
        return 3 * (self.gemm + self.attention)


def forward_flops(shape: Mapping[str, Any], seq: int, padded_vocab: int) -> StepFlops:
    """Forward FLOPs of one sequence (see module doc). ``shape``: Megatron names (kg.inputs.training.job
    TrainingJob.shape()); ``padded_vocab``: the framework's embedding rows."""
    h, L, a = shape["hidden_size"], shape["num_layers"], shape["num_attention_heads"]
    d = shape.get("kv_channels") or h // a
    g = shape.get("num_query_groups") or a
    q, kv = a * d, g * d
    stacked = 3 if shape.get("swiglu") else 2
    f = shape.get("ffn_hidden_size") or 4 * h
    attn_proj = 2 * (h * (q + 2 * kv) + q * h)
    dense_mlp = 2 * stacked * h * f
    n_moe = 0
    moe_mlp = 0
    if (shape.get("num_experts") or 0) > 1:
        n_moe = shape.get("num_moe_layers", L)
        fe = shape.get("moe_ffn_hidden_size") or f
        shared = shape.get("moe_shared_expert_intermediate_size") or 0
        moe_mlp = 2 * stacked * h * (fe * (shape.get("moe_router_topk") or 1) + shared)
    mlp = (dense_mlp * (L - n_moe) + moe_mlp * n_moe) / L
    return StepFlops(gemm_per_layer=seq * (attn_proj + mlp), attention_per_layer=2 * q * seq * seq,
                     logits=2 * seq * h * padded_vocab, layers=L)


def megatron_r080_flops(shape: Mapping[str, Any], seq: int, padded_vocab: int) -> float:
    """Model FLOPs of one sequence as Megatron-core r0.8.0 counted them (megatron/training/training.py
    ``num_floating_point_operations``): ``12 s L h^2 ((1 + g/a + s/h) d a/h + f/h · topk · (3/2 if SwiGLU)
    + V / (2 L h))`` - attention over the full s x s square, no recomputation."""
    h, L, a = shape["hidden_size"], shape["num_layers"], shape["num_attention_heads"]
    d = shape.get("kv_channels") or h // a
    g = shape.get("num_query_groups") or a
    f = shape.get("ffn_hidden_size") or 4 * h
    topk = shape.get("moe_router_topk") or 1 if (shape.get("num_experts") or 0) > 1 else 1
    gl = 1.5 if shape.get("swiglu") else 1.0
    return 12 * seq * L * h * h * ((1 + g / a + seq / h) * (d * a / h) + f / h * topk * gl + padded_vocab / (2 * L * h))


def narayanan_eq3_flops(shape: Mapping[str, Any], seq: int, padded_vocab: int) -> float:
    """Hardware FLOPs of one sequence with full recomputation, Narayanan et al. 2021 eq. 3 (GPT, MLP 4h):
    ``96 s l h^2 (1 + s / (6h) + V / (16 l h))``."""
    h, L = shape["hidden_size"], shape["num_layers"]
    return 96 * seq * L * h * h * (1 + seq / (6 * h) + padded_vocab / (16 * L * h))
