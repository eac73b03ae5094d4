"""torchtitan 0.3.0's mechanical startup checks (Trainer.Config sections, Trainer.Config.__post_init__,
ParallelDims._validate), generated from its source and evaluated on its own launch form, ``--module M --config C``
with ``--section.field`` overrides over the release's config registry (kg/frameworks/torchtitan/data)."""
from __future__ import annotations

import pytest

from kg.analyses.training import generated_checks
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.frameworks.torchtitan.reader import REGISTRY
from kg.inputs.training import parse_training_command

RUN = "torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b"


def _sites(cmd: str) -> dict[tuple[str, int], dict]:
    return {(g["path"].rsplit("/", 1)[-1], g["line"]): g for g in generated_checks(parse_training_command(cmd))}


def test_every_registry_config_starts_on_8_gpus():
    reg = load_yaml(REGISTRY).data
    assert sum(len(v) for v in reg.values()) >= 30
    for module, configs in reg.items():
        for config in configs:
            cmd = f"torchrun --nproc_per_node 8 -m torchtitan.train --module {module} --config {config}"
            assert _sites(cmd) == {}, (module, config)


@pytest.mark.parametrize("extra,site,message", [
    # CUDA graphs are on by default in 0.3.0 and refuse pipeline parallelism (trainer.py:184)
    ("--parallelism.pipeline_parallel_degree 2", ("trainer.py", 184), "CUDA graphs do not support pipeline"),
    ("--parallelism.pipeline_parallel_degree 2 --training.disable_cuda_graphs true "
     "--parallelism.pipeline_parallel_microbatch_size 3", ("trainer.py", 134), "training.local_batch_size"),
    ("--compile.enable_async_tensor_parallel true", ("configs.py", 307), "Async TP requires 'model'"),
])
def test_torchtitan_refusals(extra, site, message):
    got = _sites(f"{RUN} {extra}")
    assert site in got, sorted(got)
    assert got[site]["message"].startswith(message)
    assert got[site]["url"].startswith("https://github.com/pytorch/torchtitan/blob/v0.3.0/torchtitan/")


def test_the_world_size_product_is_refused_by_its_rule_and_not_again_by_a_generated_row():
    # 3 x 2 = 6 ranks of 8: dp_replicate * dp_shard * cp * tp * pp != WORLD_SIZE (parallel_dims.py:186), the site
    # torchtitan-parallel-dims-not-world-size cites, so the generated table leaves it to the rule
    from kg.analyses.training import training_report
    from kg.engine.rules import load_ruleset
    cmd = f"{RUN} --parallelism.tensor_parallel_degree 3 --parallelism.data_parallel_shard_degree 2"
    assert ("parallel_dims.py", 186) not in _sites(cmd)
    errors = [f.rule_id for f in training_report(parse_training_command(cmd), load_ruleset("training")).findings
              if f.severity == "error"]
    # and llama3_8b's seq_len 8192 % TP 3 = 2 (trainer.py:310-311)
    assert errors == ["torchtitan-parallel-dims-not-world-size", "torchtitan-seq-len-not-divisible"]


def test_a_toml_job_is_not_checked_against_0_3_0_and_an_unknown_config_is_an_error():
    with pytest.raises(OptkgError, match="did you mean llama3_8b"):
        parse_training_command("torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8bb")
    job = parse_training_command(RUN)
    assert job.framework_version == "0.3.0" and job.get("seq_length") == 8192 and job.get("micro_batch_size") == 1
