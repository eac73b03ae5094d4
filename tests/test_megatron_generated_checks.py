"""Megatron's mechanical startup checks generated from its released source (kg/frameworks/megatron/checks/,
tools/megatron_generated_checks.py) and evaluated on jobs: they fire with Megatron's own message and path:line
where Megatron refuses, and stay silent on Megatron's own published launches."""
from __future__ import annotations

import pytest

from kg.frameworks.megatron.generated import findings, rows
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command


def _fired(cmd: str, model: str | None = None) -> dict[tuple[str, int], dict]:
    job = parse_training_command(cmd, model=resolve_model(model) if model else None)
    return {(f["path"].rsplit("/", 1)[-1], f["line"]): f for f in findings(job)}


def test_bf16_and_fp16_together_is_refused_where_megatron_refuses_it():
    got = _fired("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --bf16 --fp16 "
                 "--micro-batch-size 1 --seq-length 4096 --max-position-embeddings 4096", "meta-llama/Llama-3.1-8B")
    assert set(got) == {("transformer_config.py", 916), ("arguments.py", 703), ("arguments.py", 712)}
    assert got[("transformer_config.py", 916)]["message"].startswith("Only one of self.fp16")
    assert got[("arguments.py", 703)]["values"] == "bf16 = True, fp16 = True"


@pytest.mark.parametrize("flags,site,message", [
    ("--use-torch-fsdp2 --pipeline-model-parallel-size 2", 608, "--use-torch-fsdp2 is not supported with pipeline"),
    ("--overlap-param-gather --overlap-grad-reduce", 598, "--overlap-param-gather only supported with distributed"),
    ("--optimizer-cpu-offload --use-distributed-optimizer", 1191, "The optimizer cpu offload must be used in conjunction"),
    ("--context-parallel-size 2 --seq-length 4095", 818, "seq-length should be a multiple of 2 * context-parallel-size"),
])
def test_mechanical_checks_of_validate_args(flags, site, message):
    got = _fired(f"torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 1 --seq-length 4096 {flags}",
                 "meta-llama/Llama-3.1-8B")
    assert ("arguments.py", site) in got and got[("arguments.py", site)]["message"].startswith(message), sorted(got)


@pytest.mark.parametrize("flags,fired", [
    # argparse.BooleanOptionalAction flags (--x / --no-x) are read: the RL checks of validate_args (arguments.py:329-388)
    ("--perform-rl-step --rl-use-sequence-packing --micro-batch-size 2", {387}),
    ("--perform-rl-step --no-rl-use-sequence-packing --micro-batch-size 2", set()),
    ("--perform-rl-step --rl-partial-rollouts --rl-remove-kv-cache-during-training", {343}),
    ("--rl-partial-rollouts --rl-remove-kv-cache-during-training", set()),  # not an RL step: not checked
])
def test_boolean_optional_flags_of_the_rl_checks(flags, fired):
    got = _fired(f"torchrun --nproc_per_node 8 pretrain_gpt.py --seq-length 4096 {flags}", "meta-llama/Llama-3.1-8B")
    assert {line for (f, line) in got if f == "arguments.py" and 329 <= line <= 388} == fired


CG = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 16 --hidden-size 2048 "
      "--num-attention-heads 16 --seq-length 4096 --micro-batch-size 1 --bf16 ")
CG_MOE = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 --sequence-parallel "


@pytest.mark.parametrize("flags,fired", [
    # TransformerConfig's cuda_graph_scope checks (megatron-core 0.16.1 transformer_config.py:1739-1782), over the
    # scope names --cuda-graph-scope takes (each converted to the CudaGraphScope member of that name)
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope full_iteration", {1739}),
    ("--cuda-graph-impl local --cuda-graph-scope full_iteration", set()),
    (CG_MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_preprocess", {1748}),
    # the local implementation adds moe_router itself (:1731-1734): no refusal
    (CG_MOE + "--cuda-graph-impl local --cuda-graph-scope moe_preprocess", set()),
    (CG_MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe moe_router", {1743, 1768}),
    (CG_MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe", {1768}),
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope moe", {1752}),
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn mlp", set()),
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope full", set()),
    ("--cuda-graph-scope moe", set()),  # no CUDA graphs (cuda_graph_impl none): nothing is checked
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn --recompute-granularity full "
     "--recompute-method uniform --recompute-num-layers 1", {1782}),
    # graphed selective recompute takes no random numbers (:1801-1823): the default recompute module core_attn with
    # Megatron's default attention dropout 0.1 under a whole-layer graph is refused; dropout 0, or the module outside
    # the graphed scope, holds
    ("--cuda-graph-impl transformer_engine --recompute-granularity selective", {1806}),
    ("--cuda-graph-impl transformer_engine --recompute-granularity selective --attention-dropout 0.0", set()),
    ("--cuda-graph-impl transformer_engine --recompute-granularity selective --recompute-modules mlp "
     "--attention-dropout 0.0", {1813}),
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn --recompute-granularity selective "
     "--recompute-modules mlp --attention-dropout 0.0", set()),
    (CG_MOE + "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router --recompute-granularity selective "
     "--recompute-modules moe --attention-dropout 0.0 --hidden-dropout 0.0", {1792}),
])
def test_cuda_graph_scope_checks_fire_where_transformer_config_refuses(flags, fired):
    got = {line for (f, line) in _fired(CG + flags) if f == "transformer_config.py" and 1690 <= line <= 1830}
    assert got == fired


RUN_TABLE_1 = {  # NVIDIA/Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh: TP, PP, MBS, GBS, layers, h, heads, nodes
    "39B": (8, 2, 4, 1536, 48, 8192, 64, 64, ""), "76B": (8, 4, 2, 1792, 60, 10240, 80, 128,
                                                          "--num-layers-per-virtual-pipeline-stage 5"),
    "145B": (8, 8, 2, 2304, 80, 12288, 96, 192, "--num-layers-per-virtual-pipeline-stage 5"),
    "310B": (8, 16, 1, 2160, 96, 16384, 128, 240, "--num-layers-per-virtual-pipeline-stage 3"),
    "530B": (8, 35, 1, 2520, 105, 20480, 128, 315, "--num-layers-per-virtual-pipeline-stage 1"),
    "1T": (8, 64, 1, 3072, 128, 25600, 160, 384, ""),
}


@pytest.mark.parametrize("size", sorted(RUN_TABLE_1))
def test_megatrons_own_published_launches_raise_nothing(size):
    tp, pp, mbs, gbs, layers, h, heads, nodes, extra = RUN_TABLE_1[size]
    cmd = (f"torchrun --nproc_per_node 8 --nnodes {nodes} pretrain_gpt.py --tensor-model-parallel-size {tp} "
           f"--pipeline-model-parallel-size {pp} --micro-batch-size {mbs} --global-batch-size {gbs} --num-layers {layers} "
           f"--hidden-size {h} --num-attention-heads {heads} --seq-length 2048 --max-position-embeddings 2048 "
           f"--train-iters 500 --lr 0.0001 --min-lr 0.00001 --lr-decay-style cosine --fp16 --loss-scale 8192 {extra}")
    assert _fired(cmd) == {}


def test_megatron_examples_llama3_8b_fp8_and_gpt3_175b_raise_nothing():
    # NVIDIA/Megatron-LM core_v0.16.1 examples/llama/train_llama3_8b_h100_fp8.sh (its MODEL_ARGS and TRAINING_ARGS)
    llama = ("torchrun --nproc_per_node 8 pretrain_gpt.py --use-mcore-models --num-layers 32 --hidden-size 4096 "
             "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
             "--kv-channels 128 --seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
             "--rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 --hidden-dropout 0.0 --swiglu "
             "--init-method-std 0.0134 --attention-backend fused --apply-layernorm-1p "
             "--untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 1 --global-batch-size 128 "
             "--lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine "
             "--clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 "
             "--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1 "
             "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max")
    assert _fired(llama) == {}
    # examples/gpt3/train_gpt3_175b_distributed.sh on 16 nodes (its own NUM_NODES=1 cannot hold TP 8 x PP 16)
    gpt3 = ("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --num-layers 96 --hidden-size 12288 "
            "--num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 --attention-backend auto "
            "--micro-batch-size 1 --global-batch-size 1536 --train-iters 500000 --weight-decay 0.1 --adam-beta1 0.9 "
            "--adam-beta2 0.95 --init-method-std 0.006 --clip-grad 1.0 --fp16 --lr 6.0e-5 --lr-decay-style cosine "
            "--min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000 --tensor-model-parallel-size 8 "
            "--pipeline-model-parallel-size 16")
    assert _fired(gpt3) == {}


def test_every_generated_row_names_a_site_of_the_release():
    assert len(rows()) >= 100
    for r in rows():
        assert r["package"] in ("megatron-core", "megatron-lm") and r["line"] > 0 and r["expr"]


def test_a_refusal_a_hand_rule_covers_is_reported_once():
    # Megatron-LM arguments.py:317 asserts world % (TP x PP x CP) == 0; rule training-world-not-divisible-by-model-
    # parallel cites that site, so the generator writes no row for it
    job = parse_training_command("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 16 --bf16 "
                                 "--micro-batch-size 1 --global-batch-size 64 --seq-length 4096",
                                 model=resolve_model("meta-llama/Llama-3.1-8B"))
    assert [f["rule_id"] for f in findings(job)] == []
    assert "megatron-lm-megatron-training-arguments-317" not in {r["id"] for r in rows()}


def test_generated_messages_print_no_unrendered_placeholders():
    from kg.analyses.training import unplaceholder
    # the scanner keeps f-string fields as {..} (megatron-lm-core_v0.16.1.yaml, arguments.py:317 and :194)
    assert unplaceholder("world size ({..}) is not divisible by total_model_size (total_model_size={..})") == \
        "world size is not divisible by total_model_size"
    assert unplaceholder("Arguments differ from heterogeneous config: {..}") == \
        "Arguments differ from heterogeneous config: ..."
