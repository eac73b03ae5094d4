"""Uneven Megatron pipelines: the most loaded rank is the stage with most layers x micro-batches in flight, not always
the first. megatron-core 0.16.1 transformer_block.py:75-146 (layers per stage: the given first / last counts, the rest
split evenly), pipeline_parallel/schedules.py:2093-2096 (1F1B: rank r holds min(PP - r, m) micro-batches)."""
from __future__ import annotations

import pytest

from kg.analyses.training import training_facts
from kg.derive.training_memory import stage_layers
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

MEG = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
       "--pipeline-model-parallel-size 8 --sequence-parallel --use-distributed-optimizer --bf16 --micro-batch-size 1 "
       "--global-batch-size 512 --seq-length 4096 ")
LAYER = 855_654_400 // 8          # Llama-3.1-70B decoder layer parameters per TP-8 rank
EMB = 129_024 * 8192 // 8         # word embeddings per TP-8 rank (vocab 128,256 padded to 128 x TP)
PER_LAYER = 163_577_856           # 156 MiB: Korthikanti Table 2, SP, TP 8, s 4096, b 1


def _mem(flags: str):
    job = parse_training_command(MEG + flags, model=resolve_model("meta-llama/Llama-3.1-70B"), where="--train")
    return training_facts(job)[2]["memory"]


def test_a_middle_stage_with_more_layers_is_the_most_loaded():
    # 80 layers, first 8, last 6: six middle stages of 11; stage 1 holds 11 x 7 = 77 layer activations, stage 0 8 x 8
    mem = _mem("--decoder-first-pipeline-num-layers 8 --decoder-last-pipeline-num-layers 6")
    assert mem["stage"] == "pipeline stage 1"
    assert (mem["params_per_gpu"], mem["layers_on_first_stage"], mem["in_flight_microbatches"]) == (11 * LAYER, 11, 7)
    assert mem["activations_bytes"] == 77 * PER_LAYER
    assert mem["model_states_bytes"] == 18 * 11 * LAYER   # 2 + 4 + 12 B per parameter, distributed optimizer / DP 1


def test_a_heavier_first_stage_stays_the_most_loaded():
    # first 12, last 8: middle stages of 10; stage 0 12 x 8 = 96 layer activations against 10 x 7 = 70
    mem = _mem("--decoder-first-pipeline-num-layers 12 --decoder-last-pipeline-num-layers 8")
    assert mem["stage"] == "first pipeline stage"
    assert mem["params_per_gpu"] == 12 * LAYER + EMB


@pytest.mark.parametrize("first,last,want", [(None, 3, [11, 11, 11, 3]), (8, 6, [8, 11, 11, 6]),
                                             (None, None, [10, 10, 10, 10])])
def test_layers_per_stage_as_megatron_builds_them(first, last, want):
    assert [stage_layers(80, 8, first, last, r) for r in (0, 1, 6, 7)] == want
