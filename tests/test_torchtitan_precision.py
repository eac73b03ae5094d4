"""torchtitan 0.2.x without FSDP: a TP / PP job runs in float32 (mixed precision is fully_shard's, 0.2.1
distributed/utils.py:252-262, pytorch/torchtitan#630), replicas beside TP / PP are refused (DDP on a 1-D mesh only,
0.2.1 models/llama3/infra/parallelize.py:142), and float32 activations are sized at 4 B."""
from __future__ import annotations

from fractions import Fraction

import pytest

from kg.analyses.training import training_facts, training_report
from kg.derive.training_memory import activation_bytes_per_layer
from kg.engine.rules import load_ruleset
from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
from kg.inputs.modelcfg import resolve_model

TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 8192
[parallelism]
tensor_parallel_degree = 8
{extra}
[activation_checkpoint]
mode = "selective"
"""


def _job(world: int | None, extra: str = ""):
    return parse_torchtitan_toml(TOML.format(extra=extra), "tt.toml", resolve_model, world)


@pytest.mark.parametrize("world,extra,dtype,sharding", [
    (8, "", "fp32", "no_shard"),            # TP 8 fills 8 GPUs: dp_shard -1 -> 1, no fully_shard
    (16, "", "bf16", "full_shard"),         # dp_shard 2: FSDP, MixedPrecisionPolicy bf16
    (8, "pipeline_parallel_degree = 1\ncontext_parallel_degree = 2\ntensor_parallel_degree = 4", "bf16",
     "full_shard"),                          # CP 2 enables fully_shard at dp_shard 1
    (None, "", "bf16", "full_shard"),       # world size unknown: the reader's reading (FSDP) stands
])
def test_torchtitan_0_2_tp_job_without_fsdp_runs_in_float32(world, extra, dtype, sharding):
    if "context_parallel_degree" in extra:
        job = parse_torchtitan_toml(TOML.replace("tensor_parallel_degree = 8\n", "").format(extra=extra), "tt.toml",
                                    resolve_model, world)
    else:
        job = _job(world, extra)
    _, ns, derived = training_facts(job)
    assert (ns["params_dtype"], ns["fsdp_sharding"]) == (dtype, sharding)
    if dtype == "fp32":
        assert any("runs this job in float32" in n and "torchtitan#630" in n for n in job.notes)


def test_count_given_after_reading_decides_fsdp_too():
    # `optkg check tt.toml --count 8`: the world size arrives after the reader; TP 8 on 8 GPUs is not FSDP
    job = _job(None)
    job.set("world_size", 8, "--count")
    _, ns, derived = training_facts(job)
    assert (ns["params_dtype"], ns["fsdp_sharding"]) == ("fp32", "no_shard")
    # Llama-3.1-8B TP 8: 1,003,782,656 parameters on the GPU, 4 + 4 + 8 B
    mem = derived["memory"]
    assert (mem["weights_bytes"], mem["gradients_bytes"], mem["optimizer_bytes"]) == (
        4 * 1_003_782_656, 4 * 1_003_782_656, 8 * 1_003_782_656)


def test_torchtitan_0_3_0_applies_fully_shard_at_shard_degree_1():
    job = _job(8)
    job.framework_version = "0.3.0"
    job.configs.pop("torchtitan_toml")  # 0.3.0 loads no TOML: the same job as its --module / --config would give
    _, ns, _ = training_facts(job)
    assert ns["params_dtype"] == "bf16"


def test_float32_activations_double_the_16_bit_tensors_not_the_masks():
    # Llama-3.1-8B, s 8192, b 1, TP 8 with SP, selective: (8 + 6 x 14336/4096) sharded + 8 replicated 16-bit
    # tensors and 2 one-byte masks, x s*b*h/t = 4,194,304: 39 -> 76 (x 2 - 2)
    shape = {"hidden_size": 4096, "num_attention_heads": 32, "ffn_hidden_size": 14336, "swiglu": True}
    sbh_t = 8192 * 4096 // 8
    assert activation_bytes_per_layer(shape, 8192, 1, 8, True, "selective", True) == 39 * sbh_t
    assert activation_bytes_per_layer(shape, 8192, 1, 8, True, "selective", True, 4) == 76 * sbh_t == 318_767_104
    # full recompute keeps the layer input only: 2 -> 4 B per element
    assert activation_bytes_per_layer(shape, 8192, 1, 8, True, "full", True, 4) == 4 * sbh_t
    # scores stored (no flash, no recompute): 5 a s / h -> (4 x 2 + 1) a s / h
    no_sp = activation_bytes_per_layer(shape, 2048, 1, 1, False, "none", False, 4)
    assert no_sp == 2048 * 4096 * (76 + 9 * Fraction(32 * 2048, 4096))


@pytest.mark.parametrize("extra,errors", [
    ("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 1\ntensor_parallel_degree = 4",
     ["torchtitan-ddp-with-model-parallelism"]),
    # HSDP (replicate 2 x shard 2) beside TP 2 is fully_shard's mesh: it starts
    ("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 2\ntensor_parallel_degree = 2", []),
])
def test_torchtitan_0_2_refuses_ddp_replicas_beside_tp(extra, errors):
    text = TOML.replace("tensor_parallel_degree = 8\n", "").format(extra=extra)
    job = parse_torchtitan_toml(text, "tt.toml", resolve_model, 8)
    got = [f.rule_id for f in training_report(job, load_ruleset("training")).findings if f.severity == "error"]
    assert got == errors
    if errors:
        job.framework_version = "0.3.0"
        job.configs.pop("torchtitan_toml")  # 0.3.0 loads no TOML: the same job as its --module / --config would give
        assert "torchtitan-ddp-with-model-parallelism" not in [
            f.rule_id for f in training_report(job, load_ruleset("training")).findings]



@pytest.mark.parametrize("version", ["0.3.0", "9.9.9"])
def test_a_toml_job_config_at_torchtitan_0_3_or_newer_is_refused(version):
    # 0.3.0's ConfigManager takes --module / --config and has no TOML loader (config/manager.py:48-91)
    from kg.core.errors import OptkgError
    job = _job(8)
    job.framework_version = version
    with pytest.raises(OptkgError, match=f"torchtitan {version} loads no TOML"):
        training_facts(job)
