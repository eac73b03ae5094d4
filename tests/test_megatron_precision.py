"""Megatron-LM trains in float32 unless --bf16 or --fp16 is given: validate_args sets args.params_dtype =
torch.float and changes it only for those switches (megatron/training/arguments.py:701-713 at core_v0.16.1)."""
from __future__ import annotations

import pytest

from kg.analyses.training import training_facts
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

MEG = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "
       "--global-batch-size 64 --seq-length 4096 --use-distributed-optimizer")


# Llama-3.1-8B at TP 2: 4,015,130,624 parameters per GPU; distributed optimizer over DP 4
P = 4_015_130_624


@pytest.mark.parametrize("extra,dtype,weights,optimizer", [
    ("", "fp32", 4 * P, 8 * P // 4),          # float32 weights, Adam 8 B (no separate master)
    (" --bf16", "bf16", 2 * P, 12 * P // 4),  # bf16 weights, fp32 master + Adam 12 B
])
def test_megatron_lm_without_bf16_or_fp16_trains_in_float32(extra, dtype, weights, optimizer):
    job = parse_training_command(MEG + extra, model=resolve_model("meta-llama/Llama-3.1-8B"), where="--train")
    _, ns, derived = training_facts(job)
    mem = derived["memory"]
    assert (ns["params_dtype"], mem["params_per_gpu"]) == (dtype, P)
    assert (mem["weights_bytes"], mem["gradients_bytes"], mem["optimizer_bytes"]) == (weights, 4 * P, optimizer)
    # float32 activations: 752 MiB per layer against 392 MiB in bf16 (no SP, TP 2, s 4096)
    assert mem["activation_bytes_per_layer"] == {"fp32": 788_529_152, "bf16": 411_041_792}[dtype]
    assert ("neither --bf16 nor --fp16: Megatron-LM trains in float32" in " ".join(job.notes)) == (dtype == "fp32")


def test_ms_swift_megatron_command_keeps_its_own_dtype():
    job = parse_training_command("megatron sft --model Qwen/Qwen3-8B --tensor_model_parallel_size 2 "
                                 "--micro_batch_size 1 --global_batch_size 16", where="--train")
    assert job.get("params_dtype") != "fp32"
