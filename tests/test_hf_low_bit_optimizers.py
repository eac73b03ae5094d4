"""HF Trainer --optim low-bit optimizers keep 1-byte (bitsandbytes 8-bit) or half-byte (torchao AdamW4bit) states
(transformers 5.24.0 trainer_optimizer.py:253-289, :460-467); nn.Embedding weights keep 32-bit states under bitsandbytes
8-bit (trainer.py:1328-1338). Sized as 2 B weights + 2 B gradients + (states + 4 B fp32 master) per parameter."""
from __future__ import annotations

import pytest

from kg.analyses.training import training_facts
from kg.frameworks.hf_trainer.reader import trainer_optimizer
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

P, EMB = 8_030_261_248, 128_256 * 4096   # Llama-3.1-8B parameters; its input embedding


def _optimizer_of(args: str) -> tuple:
    """(optimizer name, optimizer state bytes) of an HF Trainer run of Llama-3.1-8B on one GPU with ``args``."""
    job = parse_training_command("torchrun --nproc_per_node 1 train.py --per_device_train_batch_size 1 --bf16 "
                                 f"--max_seq_length 1024 {args}", model=resolve_model("meta-llama/Llama-3.1-8B"),
                                 where="--train")
    return job.get("optimizer"), training_facts(job)[2]["memory"]["optimizer_bytes"]


@pytest.mark.parametrize("optim,name,optimizer_bytes", [
    ("adamw_torch", "adamw", 12 * P),
    ("adamw_bnb_8bit", "adamw-8bit", 6 * P + 6 * EMB),      # 2 + 4 B, the embedding at 12 B
    ("paged_adamw_8bit", "adamw-8bit", 6 * P + 6 * EMB),
    ("paged_adamw_32bit", "adamw", 12 * P),
    ("adamw_torch_4bit", "adamw-4bit", 5 * P),
    ("lion_8bit", "lion-8bit", 5 * P + 3 * EMB),            # 1 + 4 B, the embedding at 8 B
])
def test_low_bit_optimizer_states_are_sized_at_their_bits(optim, name, optimizer_bytes):
    assert _optimizer_of(f"--optim {optim}") == (name, optimizer_bytes)


def test_trainer_optimizer_names():
    assert [trainer_optimizer(o) for o in ("adamw_8bit", "ademamix_8bit", "rmsprop_bnb_8bit", "adafactor", "sgd")] == \
        ["adamw-8bit", "ademamix-8bit", "rmsprop-8bit", "adafactor", "sgd"]


@pytest.mark.parametrize("args,name,optimizer_bytes", [
    ("--optim sgd", "sgd-no-momentum", 4 * P),                          # the fp32 master alone
    ("--optim sgd --optim_args 'momentum=0.9,nesterov=True'", "sgd", 8 * P),  # + a 4 B momentum buffer
    ("--optim_args 'momentum = 0.0' --optim sgd", "sgd-no-momentum", 4 * P),  # spaces dropped, 0 is none
])
def test_hf_sgd_holds_a_momentum_buffer_only_when_optim_args_give_one(args, name, optimizer_bytes):
    # TrainingArguments passes momentum to torch.optim.SGD only through --optim_args (transformers 5.24.0
    # trainer_optimizer.py:65-73, :317-326); torch's default momentum 0 keeps no buffer. It was sized with one: 8 x P
    assert _optimizer_of(args) == (name, optimizer_bytes)
