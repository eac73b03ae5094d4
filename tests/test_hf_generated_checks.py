"""The argument dataclasses' own startup checks, generated from the released source and evaluated on a job's
flags and recipe files: transformers 5.24.0 TrainingArguments.__post_init__ (kg/frameworks/hf_trainer/checks) and
trl 1.16.0 GRPOConfig.__post_init__ (kg/frameworks/trl/checks), each firing with the library's own message and
path:line, silent on the public recipes optkg reads."""
from __future__ import annotations

from pathlib import Path

import pytest

from kg.analyses.training import generated_checks
from kg.inputs.training import load_training_file, parse_training_command

T = Path(__file__).parent / "fixtures" / "training_inputs"
OPEN_R1 = (f"accelerate launch --config_file {T}/open-r1/recipes/accelerate_configs/zero3.yaml src/open_r1/grpo.py "
           f"--config {T}/open-r1/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml")


def _sites(cmd: str) -> dict[tuple[str, int], dict]:
    return {(g["path"].rsplit("/", 1)[-1], g["line"]): g for g in generated_checks(parse_training_command(cmd))}


@pytest.mark.parametrize("flags,line,message", [
    ("--fp16 --bf16", 1785, "At most one of fp16 and bf16 can be True"),
    ("--eval_strategy steps --logging_steps 0", 1580, "evaluation strategy {..} requires either non-zero"),
    ("--load_best_model_at_end --eval_strategy epoch --save_strategy steps", 1751,
     "--load_best_model_at_end requires the save and eval strategy to match"),
    ("--warmup_steps -1", 1801, "Got warmup_steps = {..}, Expected value warmup_steps >= 0"),
])
def test_training_arguments_refusals(flags, line, message):
    got = _sites(f"torchrun --nproc_per_node 8 train.py --output_dir out {flags}")
    assert ("training_args.py", line) in got, sorted(got)
    assert got[("training_args.py", line)]["message"].startswith(message)
    assert got[("training_args.py", line)]["url"] == (
        f"https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/training_args.py#L{line}")


def test_a_valid_trainer_launch_raises_nothing():
    assert _sites("torchrun --nproc_per_node 8 train.py --bf16 --per_device_train_batch_size 4 "
                  "--eval_strategy steps --eval_steps 100 --save_strategy steps --save_steps 200 "
                  "--load_best_model_at_end true") == {}


def test_public_recipes_raise_nothing():
    assert _sites(OPEN_R1) == {}
    job = load_training_file(T / "llama-factory/examples/train_full/qwen3_full_sft.yaml", None, None)
    assert generated_checks(job) == []


@pytest.mark.parametrize("extra,line,message", [
    ("--num_generations 1", 1138, "GRPO requires at least 2 generations per prompt"),
    ("--auto_find_batch_size true", 1090, "auto_find_batch_size is not supported by GRPO"),
    # 8 processes x 16 per device = 128 sequences per step; a generation batch of 200 is not a multiple
    ("--generation_batch_size 200", 1104, "generation_batch_size ({..}) must be divisible by the global batch size"),
    ("--log_completions_hub_repo me/completions --log_completions false", 1081, "log_completions_hub_repo is set"),
])
def test_grpo_config_refusals_on_the_open_r1_recipe(extra, line, message):
    got = _sites(f"{OPEN_R1} {extra}")
    assert ("grpo_config.py", line) in got, sorted(got)
    assert got[("grpo_config.py", line)]["message"].startswith(message)
