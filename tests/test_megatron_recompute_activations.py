"""--recompute-activations makes Megatron's recomputation selective whatever --recompute-granularity says and
wherever the two flags stand (Megatron-LM megatron/training/arguments.py:430-432 at core_v0.16.1, validate_args:
``if args.recompute_activations: args.recompute_granularity = 'selective'``). newuser6 #5: optkg took the last of
the two, so `--recompute-activations --recompute-granularity full` was sized as full recompute (55.40 GiB, not
65.05 GiB) with no finding."""
from __future__ import annotations

import json

import pytest

from kg.inputs.training import parse_training_command
from report_text import cli  # noqa: F401  (the CLI with the report's wrapping undone)

JOB = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 "
       "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
       "--global-batch-size 64 --bf16 ")
S_B_H = 4096 * 1 * 4096
SELECTIVE_LAYER = S_B_H * (10 + 24 // 2)  # Korthikanti et al. 2022 Table 2, TP 2 without SP: 369,098,752 B
FULL_LAYER = S_B_H * 2  # full recompute keeps each layer's bf16 input: 33,554,432 B


@pytest.mark.parametrize("flags", ["--recompute-activations --recompute-granularity full",
                                   "--recompute-granularity full --recompute-activations",
                                   "--recompute-activations"])
def test_recompute_activations_is_selective_in_either_order(flags):
    assert parse_training_command(JOB + flags).get("recompute_granularity") == "selective"


def test_full_granularity_without_recompute_activations_stays_full():
    job = parse_training_command(JOB + "--recompute-granularity full --recompute-method uniform")
    assert job.get("recompute_granularity") == "full"


def _report(cli, flags):
    code, out, err = cli("check", "--train", JOB + flags, "--gpu", "H100", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    return d["derived"]["memory"], sorted(f["rule_id"] for f in d["findings"])


def test_overridden_full_granularity_is_sized_selective_and_warned(cli):
    mem, fired = _report(cli, "--recompute-activations --recompute-granularity full")
    assert mem["activation_bytes_per_layer"] == SELECTIVE_LAYER == 369_098_752
    assert mem["total_bytes"] == 69_848_342_528  # 65.05 GiB (was 59,480,023,040 = 55.40 GiB, read as full)
    assert fired == ["megatron-recompute-activations-overrides-granularity"]


def test_full_granularity_alone_is_full_and_not_warned(cli):
    mem, fired = _report(cli, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
    assert mem["activation_bytes_per_layer"] == FULL_LAYER == 33_554_432
    assert mem["total_bytes"] == 59_480_023_040
    assert fired == []
