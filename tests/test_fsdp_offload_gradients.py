"""FSDP parameter offload moves the sharded gradients to the host too: torch FSDP CPUOffload(offload_params=True)
"offloads gradients to CPU as well" (torch/distributed/fsdp/api.py), which accelerate builds from fsdp_offload_params
(accelerate 1.15.0 utils/dataclasses.py:2180-2191)."""
from __future__ import annotations

import pytest

from kg.analyses.training import training_facts
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

P = 8_030_261_248  # Llama-3.1-8B


@pytest.mark.parametrize("offload,grads", [("true", 0), ("false", 2 * P // 8)])
def test_fsdp_param_offload_keeps_no_gradients_on_the_gpu(offload, grads):
    job = parse_training_command(f"accelerate launch --use_fsdp --fsdp_offload_params {offload} --num_processes 8 "
                                 "train.py --per_device_train_batch_size 1 --bf16 --max_seq_length 1024",
                                 model=resolve_model("meta-llama/Llama-3.1-8B"), where="--train")
    mem = training_facts(job)[2]["memory"]
    assert mem["gradients_bytes"] == grads
