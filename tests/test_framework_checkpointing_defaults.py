"""Gradient checkpointing a framework turns on without a flag: LLaMA-Factory unless disable_gradient_checkpointing
(LLaMA-Factory@ff6d4d12 model/model_utils/checkpointing.py:184-194, hparams/model_args.py:145-150), and TRL's trainers
from trl 0.22.0 (sft_config.py:111-112; trl 1.16.0 base_config.py:62-63; 0.21.0 keeps TrainingArguments' false)."""
from __future__ import annotations

import pytest

from kg.analyses.training import training_facts
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

LLAMA = resolve_model("meta-llama/Llama-3.1-8B")
# Llama-3.1-8B, s 2048, micro 1, TP 1, bf16: a checkpointed layer keeps its input, 2 x s x h = 16 MiB;
# without checkpointing Korthikanti Table 2 gives 312 MiB
KEPT, FULL_LAYER = 2 * 2048 * 4096, 327_155_712


def _layer(cmd: str, version: str | None = None):
    job = parse_training_command(cmd, model=LLAMA, where="--train")
    if version:
        job.framework_version = version
    _, ns, derived = training_facts(job)
    return ns["recompute_granularity"], ns["use_reentrant"], derived["memory"]["activation_bytes_per_layer"], job


LF = ("llamafactory-cli train --stage sft --finetuning_type full --model_name_or_path x --cutoff_len 2048 "
      "--per_device_train_batch_size 1 --bf16 true")


@pytest.mark.parametrize("extra,want", [
    ("", ("full", True, KEPT)),                                  # LLaMA-Factory's use_reentrant_gc default true
    (" --gradient_checkpointing false", ("full", True, KEPT)),   # LLaMA-Factory enables it on its own
    (" --disable_gradient_checkpointing true", ("none", True, FULL_LAYER)),
])
def test_llamafactory_checkpoints_unless_disabled(extra, want):
    got = _layer(LF + extra)
    assert got[:3] == want
    assert ("LLaMA-Factory enables it" in " ".join(got[3].notes)) == (want[0] == "full")


SFT = ("accelerate launch --num_processes 8 trl/scripts/sft.py --model_name_or_path x --max_length 2048 "
       "--per_device_train_batch_size 1")


@pytest.mark.parametrize("extra,want", [
    ("", ("full", False, KEPT)),
    (" --gradient_checkpointing false", ("none", True, FULL_LAYER)),
])
def test_trl_sft_checkpoints_by_default(extra, want):
    assert _layer(SFT + extra)[:3] == want


GRPO = ("accelerate launch --num_processes 8 src/open_r1/grpo.py --model_name_or_path x --max_prompt_length 1024 "
        "--max_completion_length 1024 --per_device_train_batch_size 1 --num_generations 8")


@pytest.mark.parametrize("version,want", [(None, "full"), ("1.16.0", "full"), ("0.17.0", "none")])
def test_trl_grpo_checkpoints_from_0_22(version, want):
    assert _layer(GRPO, version)[0] == want


def test_trl_sft_run_as_a_module_checkpoints_like_its_script():
    # `python -m trl.scripts.sft` / `accelerate launch -m trl.scripts.sft` runs trl/scripts/sft.py (trl 1.16.0); it was
    # not recognised as TRL's SFT trainer and sized without checkpointing (312 MiB per layer instead of 16 MiB)
    cmd = SFT.replace("trl/scripts/sft.py", "-m trl.scripts.sft")
    recompute, _, per_layer, job = _layer(cmd)
    assert (recompute, per_layer, job.get("trainer")) == ("full", KEPT, "sft")
