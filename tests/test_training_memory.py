"""Training memory derivations against published values (exact, hand-checked or from the cited source)."""
from fractions import Fraction

import pytest

from kg.core.errors import OptkgError
from kg.derive.training_memory import (
    deepspeed_zero2_estimate, deepspeed_zero3_estimate, in_flight_microbatches,
    korthikanti_activation_bytes_per_layer, megatron_theoretical_memory, padded_vocab_size, param_counts,
    zero_paper_model_states)

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
