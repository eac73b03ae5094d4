"""The HF Trainer refuses a DeepSpeed JSON value that is not "auto" and differs from the TrainingArguments value it
stands for (transformers 5.24.0 integrations/deepspeed.py:108-132 fill_match, raised at :258-263), a flag's default
included: transformers#27830 (ds train_micro_batch_size_per_gpu=1 vs hf per_device_train_batch_size=8),
shibing624/MedicalGPT#191 (ds fp16.enabled=True without --fp16), CarperAI/trlx#376 (ds train_batch_size=32 vs 4)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg.analyses.training import generated_checks
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import parse_training_command

LLAMA = resolve_model("meta-llama/Llama-3.1-8B")


def _values(tmp_path: Path, ds: dict, flags: str, gpus: int = 8, script: str = "run_clm.py") -> str | None:
    p = tmp_path / "ds.json"
    p.write_text(json.dumps(ds))
    job = parse_training_command(f"deepspeed --num_gpus {gpus} {script} --model_name_or_path x --deepspeed {p} {flags}",
                                 model=LLAMA, where="--train")
    hit = [g for g in generated_checks(job) if g["rule_id"] == "hf-trainer-deepspeed-config-mismatch"]
    return hit[0]["values"] if hit else None


Z2 = {"zero_optimization": {"stage": 2}}


@pytest.mark.parametrize("ds,flags,values", [
    # transformers#27830: the JSON's micro batch 1 against the default per_device_train_batch_size 8
    ({**Z2, "train_micro_batch_size_per_gpu": 1}, "--fp16",
     "ds train_micro_batch_size_per_gpu=1 vs hf per_device_train_batch_size=8 (default)"),
    # MedicalGPT#191: fp16 switched on in the JSON, no --fp16 on the command
    ({**Z2, "fp16": {"enabled": True}}, "--per_device_train_batch_size 4",
     "ds fp16.enabled=True vs hf fp16|fp16_full_eval=False (default)"),
    # trlx#376: train_batch_size 32 against 8 GPUs x 2 x 1 = 16; the micro batch itself agrees
    ({**Z2, "train_batch_size": 32, "train_micro_batch_size_per_gpu": 2}, "--per_device_train_batch_size 2",
     "ds train_batch_size=32 vs hf train_batch_size (calculated)=16 = 8 processes x 2 x 1"),
    # LLaMA-Factory#1116: the string "8" is not the integer 8
    ({**Z2, "gradient_accumulation_steps": "8"}, "--gradient_accumulation_steps 8",
     "ds gradient_accumulation_steps='8' vs hf gradient_accumulation_steps=8"),
    ({**Z2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.95]}}}, "--learning_rate 2e-5",
     "ds optimizer.params.lr=0.0001 vs hf learning_rate=2e-05; "
     "ds optimizer.params.betas=[0.9, 0.95] vs hf adam_beta1+adam_beta2=[0.9, 0.999] (default)"),
])
def test_a_json_value_that_differs_from_training_arguments_is_refused(tmp_path, ds, flags, values):
    assert _values(tmp_path, ds, flags) == values


@pytest.mark.parametrize("ds,flags,gpus", [
    ({**Z2, "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1},
     "--per_device_train_batch_size 2", 4),                                  # 4 x 2 x 1 = 8
    ({**Z2, "train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto"}, "gradient_clipping": 1.0}, "", 8),
    ({**Z2, "train_micro_batch_size_per_gpu": 1}, "--auto_find_batch_size", 8),  # must_match off
    # --deepspeed alone: a script of its own argparse may build TrainingArguments from its own values (DeepSpeed#6914)
    ({**Z2, "train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}}, "", 8),
])
def test_auto_and_agreeing_values_pass(tmp_path, ds, flags, gpus):
    assert _values(tmp_path, ds, flags, gpus) is None


def test_a_trl_trainers_own_learning_rate_default_is_not_compared(tmp_path):
    # SFTConfig's learning_rate default is 2e-5 (trl 1.16.0 sft_config.py:140-141), not TrainingArguments' 5e-5
    ds = {**Z2, "optimizer": {"type": "AdamW", "params": {"lr": 2e-5}}}
    assert _values(tmp_path, ds, "--bf16", script="trl/scripts/sft.py") is None
    assert _values(tmp_path, ds, "--bf16") == "ds optimizer.params.lr=2e-05 vs hf learning_rate=5e-05 (default)"
