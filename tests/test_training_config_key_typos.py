"""A misspelt key in a training config is refused by the framework at startup, so optkg says so with the
nearest real key (an ERROR naming file and line) instead of silently checking the job without it."""
import json

import pytest

from report_text import cli  # noqa: F401  (the CLI with the report's wrapping undone)

TT = """[job]
dump_folder = "./outputs"

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 8192

[parallelism]
data_parallel_shard_degree = -1
tensor_paralel_degree = 2
"""


def _check(cli, *args):
    code, out, err = cli("check", *args, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_torchtitan_toml_field_that_jobconfig_lacks_is_an_error_with_the_nearest_field(cli, tmp_path):
    # torchtitan 0.2.1 config/manager.py:166-172: ValueError("Invalid field names in ... data: {...}")
    p = tmp_path / "tt_typo.toml"
    p.write_text(TT)
    code, d = _check(cli, str(p), "--count", "8", "--gpu", "H100", "--no-speed")
    f = [f for f in d["findings"] if f["rule_id"] == "torchtitan-invalid-config-field"]
    assert code == 1 and len(f) == 1 and f[0]["severity"] == "error"
    assert f"{p}:14: parallelism.tensor_paralel_degree is not a field of torchtitan's JobConfig (did you mean " \
           "parallelism.tensor_parallel_degree?)" in f[0]["message"]


def test_torchtitan_toml_with_real_fields_of_either_0_2_release_is_clean(tmp_path):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
    # activation_checkpoint.preserve_rng_state exists only at 0.2.1, early_stop at both; a nested quantize table
    ok = TT.replace("tensor_paralel_degree", "tensor_parallel_degree") + \
        '\n[activation_checkpoint]\nmode = "full"\npreserve_rng_state = true\nearly_stop = false\n' \
        '\n[quantize.linear.float8]\nrecipe_name = "rowwise"\n'
    assert "torchtitan_invalid_fields" not in parse_torchtitan_toml(ok, "ok.toml").configs
    bad = ok.replace("recipe_name", "recipe_nam")
    assert parse_torchtitan_toml(bad, "b.toml").configs["torchtitan_invalid_fields"] == [
        ["b.toml:22: quantize.linear.float8.recipe_nam", "quantize.linear.float8.recipe_name"]]


def test_torchtitan_toml_fields_new_in_0_2_2_are_not_refused(tmp_path):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
    # torchtitan 0.2.2 config/job_config.py:431 adds parallelism.context_parallel_load_balancer and :175
    # lr_scheduler.total_steps; its ConfigManager (manager.py:166-172) loads them, so they are no typo
    ok = TT.replace("tensor_paralel_degree", "tensor_parallel_degree") + \
        'context_parallel_load_balancer = "ptrr"\n\n[lr_scheduler]\ntotal_steps = 1000\n'
    assert "torchtitan_invalid_fields" not in parse_torchtitan_toml(ok, "ok.toml").configs
    assert parse_torchtitan_toml(ok.replace("total_steps", "total_step"), "b.toml").configs[
        "torchtitan_invalid_fields"] == [["b.toml:18: lr_scheduler.total_step", "lr_scheduler.total_steps"]]


ACC = """compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_process: 16
mixed_precison: bf16
fsdp_config:
  fsdp_sharding_strategy: FULL_SHARD
"""


def test_accelerate_config_key_that_accelerate_lacks_is_an_error_with_the_nearest_key(cli, tmp_path):
    # accelerate 1.15.0 commands/config/config_args.py:154-159: "The config file at ... had unknown keys"
    p = tmp_path / "acc_typo.yaml"
    p.write_text(ACC)
    code, d = _check(cli, str(p), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--seq-length", "4096",
                     "--micro-batch-size", "1", "--no-speed")
    f = [f for f in d["findings"] if f["rule_id"] == "accelerate-config-unknown-key"]
    assert code == 1 and len(f) == 1
    assert f"{p}:3: num_process is not a key of an accelerate config (did you mean num_processes?); " \
           f"{p}:4: mixed_precison is not a key of an accelerate config (did you mean mixed_precision?)" in f[0]["message"]


def test_accelerate_config_legacy_keys_process_config_consumes_are_accepted(tmp_path):
    from kg.frameworks.hf_trainer.reader import apply_accelerate_config
    from kg.inputs.training.job import TrainingJob
    job = TrainingJob(framework="hf-trainer")
    # fp16 and dynamo_backend are popped by process_config before the check (config_args.py:114-119)
    apply_accelerate_config(job, {"distributed_type": "MULTI_GPU", "num_processes": 8, "fp16": True,
                                  "dynamo_backend": "NO", "machine_rank": 0}, "a.yaml")
    assert "accelerate_unknown_keys" not in job.configs


VERL = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-8B "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gp=4 actor_rollout_ref.model.enable_gradient_checkpointin=True "
        "+actor_rollout_ref.model.override_config.attention_dropout=0.0 trainer.n_gpus_per_node=8 "
        "data.max_prompt_length=1024 data.max_response_length=2048")


def test_verl_override_of_a_key_the_struct_config_lacks_is_an_error_with_the_nearest_key(cli):
    # Hydra struct mode: an override without + of an absent key fails ("Could not override"); +key appends
    code, d = _check(cli, "--train", VERL, "--gpu", "H100", "--no-speed")
    f = [f for f in d["findings"] if f["rule_id"] == "verl-override-of-unknown-key"]
    assert code == 1 and len(f) == 1
    assert f[0]["message"].startswith(
        "--train: actor_rollout_ref.actor.ppo_micro_batch_size_per_gp is not a key of verl's config (did you mean "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu?); --train: "
        "actor_rollout_ref.model.enable_gradient_checkpointin is not a key of verl's config (did you mean "
        "actor_rollout_ref.model.enable_gradient_checkpointing?); this report reads the job without them "
        "(a new key needs a leading +)")


def test_verl_quickstart_overrides_are_all_keys_of_the_config():
    from kg.inputs.training import parse_training_command
    # verl's PPO/GRPO quick-start overrides (docs/start/quickstart.rst), every one a key of 0.9.1's composed config
    cmd = ("python3 -m verl.trainer.main_ppo data.train_files=train.parquet data.train_batch_size=256 "
           "data.max_prompt_length=512 data.max_response_length=256 actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B "
           "actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.ppo_mini_batch_size=64 "
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.name=vllm "
           "actor_rollout_ref.rollout.gpu_memory_utilization=0.4 critic.optim.lr=1e-5 algorithm.kl_ctrl.kl_coef=0.001 "
           "algorithm.adv_estimator=grpo trainer.logger=['console','wandb'] reward_model.enable=False "
           "actor_rollout_ref.actor.fsdp_config.param_offload=False trainer.n_gpus_per_node=1 trainer.total_epochs=15")
    assert "verl_unknown_overrides" not in parse_training_command(cmd, where="--train").configs

