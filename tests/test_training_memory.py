"""Training memory derivations against published values (exact, hand-checked or from the cited source)."""
from fractions import Fraction

import pytest

from kg.core.errors import OptkgError
from kg.derive.training_memory import (
    in_flight_microbatches, korthikanti_activation_bytes_per_layer, param_counts, zero_paper_model_states)
from kg.frameworks.deepspeed.memory import deepspeed_zero2_estimate, deepspeed_zero3_estimate
from kg.frameworks.megatron.memory import megatron_theoretical_memory, padded_vocab_size

PSI = 7_500_000_000
LLAMA70 = dict(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64, num_query_groups=8,
               kv_channels=128, swiglu=True, normalization="RMSNorm", untie_embeddings_and_output_weights=True)
LLAMA8 = dict(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
              kv_channels=128, swiglu=True, normalization="RMSNorm", untie_embeddings_and_output_weights=True)


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N_d = 64, K = 12 -> 120 / 31.4 / 16.6 / 1.9 GB
    gb = [zero_paper_model_states(PSI, 64, s) / 10**9 for s in range(4)]
    assert gb == [120, Fraction(3140625, 100000), Fraction(16640625, 1000000), Fraction(1875, 1000)]
    assert [round(float(x), 1) for x in gb] == [120.0, 31.4, 16.6, 1.9]


def test_zero_paper_rejects_bad_stage():
    with pytest.raises(OptkgError):
        zero_paper_model_states(PSI, 64, 4)


def test_deepspeed_estimators_count_an_fp32_gradient_copy():
    # deepspeed 0.19.8 stage_1_and_2.py:4031  gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
    z2 = deepspeed_zero2_estimate(PSI, num_gpus_per_node=8, num_nodes=8)
    assert z2 == 2 * PSI + 18 * PSI // 64 == 17_109_375_000
    # the paper's P_os+g is 2Psi + 14Psi/N_d: DeepSpeed adds 4 bytes/param/N of fp32 gradients
    assert z2 - zero_paper_model_states(PSI, 64, 2) == 4 * PSI / 64
    assert deepspeed_zero2_estimate(PSI, 8, 8, cpu_offload=True) == 15 * 10**9
    # stage3.py:4046  gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus), largest = 4 * layer params
    z3 = deepspeed_zero3_estimate(PSI, 100_000_000, 8, 8)
    assert z3 == 400_000_000 + 2_109_375_000
    assert z3 - zero_paper_model_states(PSI, 64, 3) == 400_000_000 + 2 * PSI / 64
    assert deepspeed_zero3_estimate(PSI, 100_000_000, 8, 8, cpu_offload=True, cpu_offload_params=True) == 400_000_000
    assert deepspeed_zero3_estimate(PSI, 100_000_000, 8, 8, cpu_offload=True) == 400_000_000 + 234_375_000


def test_korthikanti_gpt3_175b():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert korthikanti_activation_bytes_per_layer(s, b, h, a, t, sp=True, recompute="selective") == 106_954_752
    assert korthikanti_activation_bytes_per_layer(s, b, h, a) == sbh * (34 + Fraction(5 * a * s, h)) == 5 * 96 * 2048**2 + 855_638_016 == 2_868_903_936
    assert korthikanti_activation_bytes_per_layer(s, b, h, a, t, sp=True) == Fraction(sbh, t) * (34 + 80)
    assert korthikanti_activation_bytes_per_layer(s, b, h, a, t) == sbh * (10 + 3 + 10)
    assert korthikanti_activation_bytes_per_layer(s, b, h, a, t, recompute="selective") == sbh * 13
    assert korthikanti_activation_bytes_per_layer(s, b, h, a, t, sp=True, recompute="full") == 2 * sbh // t


def test_in_flight_microbatches():
    assert in_flight_microbatches(4, None, 64) == 4
    assert in_flight_microbatches(4, None, 2) == 2
    assert in_flight_microbatches(1) == 1
    # interleaved: pp * (1 + (pp-1)/(pp*vpp)) = 4 * (1 + 3/20) = 4.6
    assert in_flight_microbatches(4, 5, 64) == Fraction(23, 5)


def test_padded_vocab_and_params():
    assert padded_vocab_size(128256, 8) == 129024   # multiple of 128*8 = 1024
    assert padded_vocab_size(128256, 1) == 128256
    pc = param_counts(LLAMA70, 128256)
    # Llama-3.1-70B: 70,553,706,496 parameters (80 x 855,654,400 + 8192 + 2 x 128256 x 8192)
    assert pc.dense_layer == 855_654_400
    assert pc.total == 70_553_706_496


# Megatron-LM megatron/training/theoretical_memory_usage.py @d98e8a64 run on the same arguments
# (args namespace: the LLAMA70 shape, padded_vocab_size 129024, world_size 512, num_microbatches 64)
MEGATRON_REFERENCE = [
    (dict(tp=8, pp=4, dp=16, vpp=None, sequence_parallel=True, recompute_granularity="selective",
          distributed_optimizer=True), 15_332_931_072, 10_754_211_840),
    (dict(tp=8, pp=4, dp=16, vpp=5, sequence_parallel=True, recompute_granularity="selective",
          distributed_optimizer=True), 15_332_931_072, 12_367_343_616),
    (dict(tp=8, pp=4, dp=16, vpp=None, sequence_parallel=False, recompute_granularity="none",
          distributed_optimizer=False), 40_887_816_192, 36_782_505_984),
]


@pytest.mark.parametrize("kw,w_o,act", MEGATRON_REFERENCE)
def test_megatron_theoretical_memory_to_the_byte(kw, w_o, act):
    r = megatron_theoretical_memory(LLAMA70, seq_length=4096, micro_batch_size=1, padded_vocab=129024,
                                    num_microbatches=64, world_size=512, **kw)
    assert round(r.weight_and_optimizer_bytes) == w_o
    assert round(r.activation_bytes) == act


def test_megatron_theoretical_memory_pp1_logits():
    # Llama-3.1-8B TP 2 PP 1 DP 4, s 8192, SP + selective, distributed optimizer (same reference run)
    r = megatron_theoretical_memory(LLAMA8, tp=2, pp=1, dp=4, seq_length=8192, micro_batch_size=1,
                                    padded_vocab=128256, num_microbatches=8, sequence_parallel=True,
                                    recompute_granularity="selective", distributed_optimizer=True, world_size=8)
    assert round(r.weight_and_optimizer_bytes) == 36_137_373_696
    assert round(r.activation_bytes) == 19_365_134_336


# ---- training_memory on whole jobs: sharding, offload, FSDP groups, MoE (hand-checked) ----------
from kg.derive.training_memory import batch_arithmetic, training_memory  # noqa: E402
from kg.inputs.modelcfg import resolve_model  # noqa: E402
from kg.inputs.training.job import TrainingJob  # noqa: E402

LLAMA8_PARAMS = 8_030_261_248  # 32 x 218,112,000 + 4,096 + 2 x 128,256 x 4,096


def _job(fw, model="meta-llama/Llama-3.1-8B", **settings):
    j = TrainingJob(framework=fw, model=resolve_model(model))
    for k, v in {"seq_length": 4096, "micro_batch_size": 1, **settings}.items():
        j.set(k, v, "test")
    return j


def test_zero_stages_and_offload_on_llama_8b():
    p = LLAMA8_PARAMS
    z2 = training_memory(_job("deepspeed", world_size=8, zero_stage=2))
    assert z2.params_per_gpu == p
    assert (z2.weights, z2.gradients, z2.optimizer) == (2 * p, 2 * p // 8, 12 * p // 8)
    z3 = training_memory(_job("deepspeed", world_size=8, zero_stage=3))
    assert (z3.weights, z3.gradients, z3.optimizer) == (2 * p // 8, 2 * p // 8, 12 * p // 8)
    assert z3.working_buffer == 2 * 128_256 * 4_096  # the largest unit (embedding) gathered in bf16
    off = training_memory(_job("deepspeed", world_size=8, zero_stage=3, offload_optimizer="cpu", offload_param="cpu"))
    assert (off.weights, off.gradients, off.optimizer) == (0, 0, 0)
    assert off.cpu_bytes == 12 * p // 8 + 2 * (2 * p // 8) + 2 * p // 8


def test_fsdp_hybrid_shards_within_the_node():
    full = training_memory(_job("fsdp", world_size=32, fsdp_sharding="full_shard"))
    hybrid = training_memory(_job("fsdp", world_size=32, gpus_per_node=8, fsdp_sharding="hybrid_shard"))
    assert full.optimizer == 12 * LLAMA8_PARAMS // 32
    assert hybrid.optimizer == 12 * LLAMA8_PARAMS // 8 and hybrid.weights == 2 * LLAMA8_PARAMS // 8


def test_moe_experts_sharded_by_ep():
    j = _job("megatron", model="Qwen/Qwen3-30B-A3B", world_size=32, tp_size=4, ep_size=8, sequence_parallel=True,
             distributed_optimizer=True)
    m = training_memory(j)
    assert m.total_params == 30_520_051_712
    # per layer: attention 2*2048*128*(32+4) = 18,874,368, norms 4,096, routed experts 128 x 3 x 2048 x 768
    # = 603,979,776 (/EP 8); embedding with Megatron's padded vocab (151,936 -> multiple of 128 x TP 4 = 152,064)
    # x 2048, twice (PP 1), + final norm 2,048; all /TP 4
    layer_other, experts = 18_874_368 + 4_096, 603_979_776
    emb = 2 * 152_064 * 2048 + 2048
    assert m.params_per_gpu == (48 * layer_other + emb + 48 * experts // 8) // 4 == 1_288_225_280


def test_batch_arithmetic():
    j = _job("megatron", world_size=64, tp_size=8, global_batch_size=1024, micro_batch_size=2)
    assert batch_arithmetic(j) == {"dp_size": 8, "gbs_divisible": True, "micro_batch_size": 2,
                                   "gradient_accumulation_steps": 64, "global_batch_size": 1024,
                                   "expected_global_batch_size": 1024, "batch_consistent": True,
                                   "tokens_per_step": 4_194_304}


def test_deepspeed_estimator_reported_beside_the_breakdown():
    from kg.analyses.training import training_facts
    _, _, derived = training_facts(_job("deepspeed", world_size=8, zero_stage=2))
    ds = derived["deepspeed_estimator"]
    assert ds["bytes"] == 2 * LLAMA8_PARAMS + int(18 * LLAMA8_PARAMS / 8) == 34_128_610_304
    assert ds["formula"] == "2Ψ + 18Ψ/N" and "4 fp32 grads" in ds["why"]
    # the breakdown: 2Ψ weights + (2 + 12)Ψ/N (ZeRO paper P_os+g)
    assert derived["memory"]["model_states_bytes"] == 2 * LLAMA8_PARAMS + 2 * LLAMA8_PARAMS // 8 + 12 * LLAMA8_PARAMS // 8


def test_moe_activations_use_topk_experts():
    j = _job("megatron", model="Qwen/Qwen3-30B-A3B", world_size=32, tp_size=4, ep_size=8, sequence_parallel=True,
             distributed_optimizer=True, recompute_granularity="selective")
    m = training_memory(j)
    # s b h / t x (10 + 8 + 6 x (top-8 x 768) / 2048) = 4096 x 2048 / 4 x 36
    assert m.activation_per_layer == 4096 * 2048 // 4 * 36 == 75_497_472
    assert m.layers_on_stage == 48 and m.in_flight_microbatches == 1


def _qwen235_job(**extra):
    # newuser4 #5: 256 H100, TP 2 x PP 2, EP 16, distributed optimizer
    return _job("megatron", model="Qwen/Qwen3-235B-A22B", world_size=256, tp_size=2, pp_size=2, ep_size=16,
                sequence_parallel=True, distributed_optimizer=True, **extra)


def test_megatron_expert_weights_split_over_etp_times_ep():
    # first stage: 47 layers; per layer attention 71,303,168 + norms 8,192 (/TP 2), routed experts
    # 128 x 3 x 4096 x 1536 = 2,415,919,104 (/ETP x EP); embedding 152,064 x 4096 (/TP 2)
    dense = (47 * 71_311_360 + 152_064 * 4096) // 2
    assert dense == 1_987_244_032
    etp1 = training_memory(_qwen235_job(etp_size=1))
    assert etp1.params_per_gpu == dense + 47 * 2_415_919_104 // 16 == 9_084_006_400
    # ETP defaults to TP (megatron-core 0.16.1 model_parallel_config.py:413-414)
    assert training_memory(_qwen235_job()).params_per_gpu == dense + 47 * 2_415_919_104 // 32 == 5_535_625_216
    assert training_memory(_qwen235_job(etp_size=2)).params_per_gpu == 5_535_625_216


def test_megatron_expert_optimizer_sharded_over_expert_data_parallel():
    # dense states /DP 64; expert states /expert-DP = 256 // (ETP x EP 16 x PP 2): 8 at ETP 1, 4 at ETP 2
    # (parallel_state.py:786-791, distributed_data_parallel.py:296-301 at megatron-core 0.16.1)
    etp1 = training_memory(_qwen235_job(etp_size=1))
    assert etp1.optimizer == 1_987_244_032 * 12 // 64 + 7_096_762_368 * 12 // 8 == 11_017_751_808
    assert any("/expert-DP 8 = world 256 // (ETP 1 x EP 16 x PP 2)" in a for a in etp1.accounting)
    etp2 = training_memory(_qwen235_job())
    assert etp2.optimizer == 372_608_256 + 3_548_381_184 * 12 // 4 == 11_017_751_808
    # 2 B weights + 4 B fp32 grads per parameter, + the sharded optimizer
    assert etp1.model_states == 6 * 9_084_006_400 + 11_017_751_808 == 65_521_790_208
    assert etp2.model_states == 6 * 5_535_625_216 + 11_017_751_808 == 44_231_503_104


def test_megatron_distributed_optimizer_shards_dense_states_over_dp_times_cp():
    # newuser4 #11: Llama-3.1-8B on 8 GPUs, TP 2 x CP 2 -> DP 2; megatron-core 0.16.1 builds the dense
    # distributed optimizer on intra_dp_cp_group (optimizer/__init__.py:637): DP x CP = 4 ranks
    m = training_memory(_job("megatron", world_size=8, tp_size=2, cp_size=2, sequence_parallel=True,
                             distributed_optimizer=True, seq_length=131072))
    p = (32 * 218_112_000 + 4_096 + 2 * 128_256 * 4_096) // 2
    assert m.params_per_gpu == p == 4_015_130_624
    assert m.optimizer == 12 * p // 4 and m.model_states == 6 * p + 12 * p // 4 == 36_136_175_616
    assert any("/DP 2 x CP 2 = 4 (intra_dp_cp_group)" in a for a in m.accounting)


def test_megatron_cross_check_says_its_file_ignores_cp_for_the_optimizer():
    from kg.frameworks.megatron.memory import theoretical_verdict
    j = _job("megatron", world_size=8, tp_size=2, cp_size=2, sequence_parallel=True, distributed_optimizer=True,
             recompute_granularity="selective")
    assert theoretical_verdict(j, j.parallel()).startswith(
        "weights and optimizer: this report's; Megatron-LM's file divides optimizer states by DP 2 (it has no CP), "
        "megatron-core 0.16.1 shards them over DP x CP = 4 (intra_dp_cp_group, optimizer/__init__.py:637); "
        "activations: both Korthikanti Table 2 (SP + selective)")


@pytest.mark.parametrize("release,ep,etp", [("0.2.2", 8, None), ("0.2.2", 2, 4), ("0.3.0", 8, None)])
def test_torchtitan_experts_under_ep_are_sharded_over_efsdp_not_also_tp(release, ep, etp):
    # torchtitan shards routed experts over EP x ETP (0.2.x ETP default 1; 0.3.0 none) and FSDP2 over efsdp =
    # dp_shard x CP x TP // (ETP x EP) (0.2.2 parallel_dims.py:201, 0.3.0 :401): every expert weight ends on
    # dp_shard x CP x TP = 32 ranks. Qwen3-30B-A3B, 32 GPUs, TP 4 -> dp_shard 8: dense (48 x 18,878,464 + 2 x
    # 151,936 x 2048 + 2048) / TP 4 = 382,124,544 and experts 48 x 603,979,776 / 8 = 3,623,878,656 before FSDP;
    # resident 382,124,544 / 8 + 48 x 603,979,776 / 32 = 953,735,232 (the experts split over EP x TP x dp_shard, as
    # Megatron's ETP = TP default, gave 161,011,776)
    j = _job("torchtitan", model="Qwen/Qwen3-30B-A3B", world_size=32, tp_size=4, ep_size=ep, fsdp_sharding="full_shard",
             **({"etp_size": etp} if etp else {}))
    j.framework_version = release
    m = training_memory(j)
    assert m.params_per_gpu == 382_124_544 + 3_623_878_656
    assert m.params_resident == 953_735_232
    assert (m.weights, m.gradients, m.optimizer) == (2 * 953_735_232, 2 * 953_735_232, 12 * 953_735_232)
