"""Training configs people paste, from public repositories (tests/fixtures/training_inputs/SOURCES.md), read by
their own framework's semantics: verl (Hydra YAML and key=value overrides over verl's own defaults), NeMo-RL and
NeMo Automodel YAML, TRL / open-r1 recipes with their accelerate config, LLaMA-Factory YAML."""
from __future__ import annotations

import re
from pathlib import Path

from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import load_training_file, parse_training_command

T = Path(__file__).parent / "fixtures" / "training_inputs"


def _file(rel: str):
    return load_training_file(T / rel, None, resolve_model)


def _script_command(rel: str, drop: tuple[str, ...] = ()) -> str:
    """The launch line of a shell script, with its shell variables as the script sets them."""
    text = (T / rel).read_text()
    env = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.M))
    start = text.index("python3 -m verl") if "python3 -m verl" in text else text.index("accelerate launch")
    cmd = text[start:].replace("$@", "")
    cmd = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), cmd)
    for d in drop:
        cmd = cmd.replace(d, "")
    return cmd


def test_verl_hydra_yaml_on_verls_own_megatron_defaults():
    # examples/sglang_multiturn/config/gsm8k_multiturn_megatron_grpo.yaml: `defaults: [ppo_megatron_trainer]`, so
    # verl 0.9.1's Megatron defaults fill in TP 1, SP on, distributed optimizer, 8 GPUs x 1 node, mini batch 256
    job = _file("verl/gsm8k_multiturn_megatron_grpo.yaml")
    assert job.framework == "verl"
    assert job.parallel() == {"tp_size": 1, "pp_size": 1, "cp_size": 1, "ep_size": 1, "dp_size": 8, "world_size": 8}
    assert job.get("seq_length") == 1024 + 1024 and job.get("global_batch_size") == 256 * 1
    assert job.get("distributed_optimizer") is True and job.get("grad_dtype") == "fp32"
    assert any("verl >= 0.4.0 turns sequence parallelism off itself" in n for n in job.notes)


def test_verl_command_overrides_from_its_grpo_example(cli):
    # examples/grpo_trainer/run_qwen2-7b_math_megatron.sh: TP 2 x PP 2 on 8 GPUs -> DP 2; micro 4;
    # ppo_mini_batch_size 256 x rollout.n 5 = 1,280 sequences per step; 1,024 + 1,024 tokens
    cmd = _script_command("verl/run_qwen2-7b_math_megatron.sh")
    job = parse_training_command(cmd, resolver=resolve_model)
    assert job.framework == "verl" and job.model is not None and job.model.name.endswith("Qwen2-7B-Instruct")
    assert (job.parallel()["tp_size"], job.parallel()["pp_size"], job.parallel()["dp_size"]) == (2, 2, 2)
    assert (job.get("micro_batch_size"), job.get("global_batch_size"), job.get("num_generations")) == (4, 1280, 5)
    code, out, _ = cli("check", "--train", cmd, "--gpu", "H100", "--format", "json")
    import json
    d = json.loads(out)
    assert code == 0 and d["derived"]["pipeline"]["num_microbatches"] == 1280 // (4 * 2) == 160
    assert d["derived"]["pipeline"]["bubble_fraction"] == round(1 / 160, 4)


def test_nemo_rl_70b_megatron_inherits_its_1b_parent():
    # grpo_math_70B_megatron.yaml: defaults grpo_math_1B_megatron.yaml -> grpo_math_1B.yaml; its own TP 4, PP 4,
    # cluster 8 x 8; train_global_batch_size 512, micro 1, max_total_sequence_length 4096, sequence packing
    job = _file("nemo-rl/grpo_math_70B_megatron.yaml")
    assert job.framework == "nemo"
    assert job.parallel() == {"tp_size": 4, "pp_size": 4, "cp_size": 1, "ep_size": 1, "dp_size": 4, "world_size": 64}
    assert (job.get("global_batch_size"), job.get("micro_batch_size"), job.get("seq_length")) == (512, 1, 4096)
    assert job.get("num_generations") == 32 and job.get("packing") is True and job.get("distributed_optimizer")


def test_nemo_rl_dtensor_policy_is_fsdp2():
    job = _file("nemo-rl/grpo_math_8B.yaml")
    assert job.framework == "fsdp" and job.get("fsdp_version") == 2 and job.get("fsdp_sharding") == "full_shard"
    assert job.parallel()["world_size"] == 8 and job.get("seq_length") == 4096


def test_nemo_automodel_qlora_and_pipeline_configs():
    job = _file("automodel/llama3_1_8b_squad_qlora.yaml")
    assert job.framework == "fsdp" and job.model.name.endswith("Llama-3.1-8B")
    assert (job.get("weight_quantization"), job.get("quant_storage"), job.get("peft"), job.get("lora_rank")) == \
        ("bnb-4bit", "bfloat16", "lora", 16)
    assert (job.get("global_batch_size"), job.get("micro_batch_size")) == (32, 4)
    job = _file("automodel/llama_3_3_70b_instruct_squad.yaml")
    assert (job.get("tp_size"), job.get("pp_size"), job.get("seq_length"), job.get("packing")) == (4, 2, 1024, True)


def test_open_r1_grpo_recipe_with_its_zero3_accelerate_config():
    # README: accelerate launch --config_file recipes/accelerate_configs/zero3.yaml src/open_r1/grpo.py --config ...
    cmd = (f"accelerate launch --config_file {T}/open-r1/recipes/accelerate_configs/zero3.yaml src/open_r1/grpo.py "
           f"--config {T}/open-r1/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml")
    job = parse_training_command(cmd)
    assert job.framework == "trl" and job.get("zero_stage") == 3 and job.parallel()["world_size"] == 8
    assert (job.get("micro_batch_size"), job.get("gradient_accumulation_steps"), job.get("num_generations")) == (16, 4, 16)
    assert job.get("trainer") == "grpo" and job.get("seq_length") == 512 + 1024
    assert job.get("use_reentrant") is False and job.get("recompute_granularity") == "full"
    # the command line wins over the recipe (TrlParser)
    job = parse_training_command(cmd + " --num_generations 7")
    assert job.get("num_generations") == 7


def test_llama_factory_full_sft_reads_its_deepspeed_file_from_the_repository_root():
    job = _file("llama-factory/examples/train_full/qwen3_full_sft.yaml")
    assert job.framework == "deepspeed" and job.get("zero_stage") == 3  # examples/deepspeed/ds_z3_config.json
    assert (job.get("micro_batch_size"), job.get("gradient_accumulation_steps"), job.get("seq_length")) == (1, 2, 2048)
    assert job.get("trainer") == "sft"


def test_llama_factory_fsdp_qlora_launch_sets_the_quant_storage_as_llama_factory_does():
    cmd = _script_command("llama-factory/examples/extras/fsdp_qlora/train.sh").replace(
        "examples/", f"{T}/llama-factory/examples/")
    job = parse_training_command(cmd)
    assert job.framework == "fsdp" and job.get("fsdp_sharding") == "full_shard" and job.parallel()["world_size"] == 2
    assert (job.get("weight_quantization"), job.get("quant_storage"), job.get("peft")) == ("bnb-4bit", "bf16", "lora")
