"""A job the HF Trainer runs takes TrainingArguments' batch defaults when the script does not give them:
per_device_train_batch_size 8 and gradient_accumulation_steps 1 (transformers 5.24.0 training_args.py:777,
:849-850); a DeepSpeed JSON's "auto" micro batch is filled from the same field (integrations/deepspeed.py:143-160).
Before, such a job was sized at micro batch 1 with no note and its step was "not evaluable"."""
from __future__ import annotations

import json

import pytest

from kg.analyses.training import training_facts
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

FSDP = ("torchrun --nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --bf16 "
        "--fsdp 'full_shard auto_wrap' --max_seq_length 4096")
# Llama-3.1-8B, TP 1, no SP, no recompute, s 4096: 654,311,424 B (624 MiB) of activations per layer per sequence
PER_SEQ = 654_311_424


def _facts(cmd: str):
    job = parse_training_command(cmd, model=resolve_model("meta-llama/Llama-3.1-8B"), where="--train")
    _, ns, derived = training_facts(job)
    return job, ns, derived


def test_trainer_script_without_batch_flags_is_sized_at_micro_batch_8_with_a_note():
    job, ns, derived = _facts(FSDP)
    assert (ns["micro_batch_size"], ns["gradient_accumulation_steps"]) == (8, 1)
    assert derived["batch"]["expected_global_batch_size"] == 64  # 8 x 1 x DP 8
    assert derived["memory"]["activation_bytes_per_layer"] == 8 * PER_SEQ
    note = " ".join(job.notes)
    assert "micro batch 8 (per_device_train_batch_size, transformers 5.24.0 training_args.py:777)" in note
    assert "gradient accumulation 1 (transformers 5.24.0 training_args.py:849-850)" in note


def test_trainer_script_batch_flags_win_over_the_defaults():
    job, ns, derived = _facts(FSDP + " --per_device_train_batch_size 1 --gradient_accumulation_steps 4")
    assert (ns["micro_batch_size"], ns["gradient_accumulation_steps"]) == (1, 4)
    assert derived["memory"]["activation_bytes_per_layer"] == PER_SEQ
    assert "HF Trainer's defaults" not in " ".join(job.notes)


def test_script_that_shows_no_training_arguments_keeps_its_batch_open():
    job, ns, _ = _facts("torchrun --nproc_per_node 8 my_loop.py --lr 3e-4")
    assert "micro_batch_size" not in job.settings and "HF Trainer's defaults" not in " ".join(job.notes)


@pytest.mark.parametrize("micro,expected", [("auto", 8), (4, 4)])
def test_deepspeed_json_auto_micro_batch_is_the_trainers_default(tmp_path, micro, expected):
    from kg.frameworks.deepspeed.reader import load_deepspeed_config
    from kg.inputs.training.job import TrainingJob
    p = tmp_path / "ds.json"
    p.write_text(json.dumps({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": micro,
                             "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}))
    job = TrainingJob(framework="deepspeed", model=resolve_model("meta-llama/Llama-3.1-8B"), source=str(p))
    load_deepspeed_config(p, job)
    job.set("world_size", 8, "--count")
    job.set("seq_length", 2048, "--seq-length")
    _, ns, _ = training_facts(job)
    assert ns["micro_batch_size"] == expected
    assert ("train_micro_batch_size_per_gpu is \"auto\"" in " ".join(job.notes)) == (micro == "auto")
