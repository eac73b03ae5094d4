"""The training frameworks as packages (kg/frameworks/<name>/): the registry finds every package, the generic
training code never branches on a framework's name, and a new framework is one package plus its catalog entry."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from kg.frameworks import registry
from kg.frameworks.protocol import TrainingFramework

REPO = Path(__file__).resolve().parents[1]
# the generic training pipeline: no framework name may be compared in these files
GENERIC = ["kg/inputs/training/job.py", "kg/inputs/training/command.py", "kg/inputs/training/stackfile.py",
           "kg/inputs/training/argv.py", "kg/inputs/training/__init__.py", "kg/derive/training_memory.py",
           "kg/analyses/training.py", "kg/output/training_report.py", "kg/cli/check_training.py"]


def _names() -> set[str]:
    out = set()
    for fid, fw in registry.all_frameworks().items():
        out |= {fid, *fw.aliases}
    return out


def _framework_comparisons(path: Path, names: set[str]) -> list[str]:
    """``x == 'megatron'``, ``x in ('megatron', 'nemo')``, ``match`` on a name: every comparison with a
    framework id or alias as a string constant."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            consts = [side] if isinstance(side, ast.Constant) else \
                list(side.elts) if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else []
            hits = [c.value for c in consts if isinstance(c, ast.Constant) and c.value in names]
            if hits:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: compares with {hits}")
    return found


def test_generic_training_code_compares_no_framework_name():
    names = _names()
    assert {"megatron", "deepspeed", "torchtitan", "fsdp", "hf-trainer", "accelerate", "verl", "nemo"} <= names
    found = [hit for f in GENERIC for hit in _framework_comparisons(REPO / f, names)]
    assert found == []


def test_the_comparison_finder_finds_a_branch():
    # the finder itself: a generic-looking module with the branches the refactor removed is caught
    import tempfile
    with tempfile.TemporaryDirectory(dir=REPO) as d:
        p = Path(d) / "branchy.py"
        p.write_text("def f(job, tp):\n    if job.framework in ('megatron', 'nemo'):\n        return 1\n"
                     "    return job.framework == 'torchtitan' and tp > 1\n")
        assert [h.split(": ", 1)[1] for h in _framework_comparisons(p, _names())] == \
            ["compares with ['megatron', 'nemo']", "compares with ['torchtitan']"]


def test_every_catalog_framework_has_a_package_and_back():
    from kg.inputs.runtimes import frameworks
    catalog_ids = set(frameworks())
    assert catalog_ids == set(registry.ids())
    for fid, fw in registry.all_frameworks().items():
        assert isinstance(fw, TrainingFramework) and fw.id == fid and fw.name
        assert registry.resolve(fid.upper()) == fid
        for a in fw.aliases:
            assert registry.resolve(a) == fid, a
    assert registry.resolve("accelerate") == "hf-trainer" and registry.resolve("mcore") == "megatron"
    assert registry.resolve("toyserve") is None
    assert registry.get("unknown-framework").padded_vocab(128256, 8, None) == 128256  # the generic answers


def test_the_registry_picks_the_reader_by_the_frameworks_claims():
    from kg.inputs.training import detect_command
    assert detect_command("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2") == "megatron"
    assert detect_command("deepspeed pretrain_gpt.py --tensor-model-parallel-size 2 --deepspeed "
                          "--deepspeed_config ds.json") == "deepspeed"
    assert detect_command("python3 -m verl.trainer.main_ppo trainer.nnodes=1") == "verl"
    assert detect_command("torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file a.toml") == "torchtitan"
    assert detect_command("deepspeed train.py --deepspeed ds.json") == "hf-trainer"
    assert detect_command("deepspeed --module openrlhf.cli.train_sft --zero_stage 3") == "openrlhf"


def test_framework_answers_are_their_own():
    # Megatron pads the vocabulary to 128 x TP (tokenizer.py _vocab_size_with_padding) and keeps fp32 main grads;
    # torchtitan shards norms over TP whenever TP > 1; DeepSpeed's pipeline parallelism is its PipelineEngine
    assert registry.get("megatron").padded_vocab(128256, 8, _Job()) == 129024
    assert registry.get("deepspeed").padded_vocab(128256, 8, _Job()) == 128256
    assert registry.get("megatron").grad_dtype_default(_Job()) == "fp32"
    assert registry.get("fsdp").grad_dtype_default(_Job()) == "bf16"
    assert registry.get("torchtitan").implies_sequence_parallel(_Job(), 2) is True
    assert registry.get("megatron").implies_sequence_parallel(_Job(), 2) is False
    assert registry.get("deepspeed").implied_settings(_Job(), {"pp_size": 2}) == {"pipeline_engine": True}
    assert registry.get("deepspeed").implied_settings(_Job(), {"pp_size": 1}) == {}
    assert registry.get("nemo").command_reader == "megatron" and registry.get("verl").keeps_reader_over_hint


class _Job:
    def __init__(self, **s):
        self.settings = s

    def get(self, k, d=None):
        return self.settings.get(k, d)


TOY = '''
"""toytrain: a made-up framework (its launch flag --toy-tp, a padded vocabulary, fp32 gradients)."""
from kg.frameworks.protocol import TrainingFramework


class Toy(TrainingFramework):
    id = "toytrain"
    name = "Toy Train"

    def claims_command(self, cmd, args, script):
        return 50 if script == "toytrain.py" else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.inputs.training.argv import split_command, walk_flags
        from kg.inputs.training.job import TrainingJob
        cmd = split_command(text, where)
        job = TrainingJob(framework=self.id, model=model, source=where, name="toy")
        job.set("world_size", cmd.launcher_args["gpus_per_node"], where)
        walk_flags(cmd.args, {"--toy-tp": ("value", "tp_size"), "--seq": ("value", "seq_length")},
                   lambda t, v, f: job.set(t, v, f), job.ignored, where)
        return job

    def padded_vocab(self, vocab, tp, job):
        return -(-vocab // 1000) * 1000

    def grad_dtype_default(self, job):
        return "fp32"


FRAMEWORKS = (Toy(),)
'''


def test_a_new_framework_is_one_package_plus_its_catalog_entry(tmp_path):
    for d in ("kg", "catalog", "rules"):
        shutil.copytree(REPO / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "kg/frameworks/toytrain").mkdir()
    (tmp_path / "kg/frameworks/toytrain/__init__.py").write_text(textwrap.dedent(TOY))
    (tmp_path / "catalog/frameworks/toytrain.yaml").write_text(
        "framework: toytrain\nname: Toy Train\nstages: [training]\nsource: {title: test, url: https://example.org}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OPTKG_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "kg.cli", "check", "--format", "json", "--model",
                        "meta-llama/Llama-3.1-8B", "--train", "torchrun --nproc_per_node 4 toytrain.py --toy-tp 2 "
                        "--seq 4096"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    import json
    d = json.loads(r.stdout)
    assert d["stack"]["framework"] == "toytrain" and d["derived"]["parallel"]["dp_size"] == 2
    mem = d["derived"]["memory"]
    # Llama-3.1-8B at TP 2, vocabulary 128,256 padded to 129,000 by the toy's rule: 32 layers of 218,112,000
    # parameters + 2 x 4,096 x 129,000 (untied) + 4,096 final norm, /2 -> 4,018,178,048 per GPU
    assert mem["params_per_gpu"] == (32 * 218_112_000 + 2 * 4096 * 129_000 + 4096) // 2 == 4_018_178_048
    assert mem["gradients_bytes"] == 4 * mem["params_per_gpu"]  # fp32 gradients, the toy's default
