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

