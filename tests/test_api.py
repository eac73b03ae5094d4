"""The public Python API in kg/__init__.py: the README example works as written, ``import kg`` stays
cheap, and each function gives what the matching command prints as JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kg
from conftest import REPO, run_cli

CMD = "vllm serve Qwen/Qwen3-235B-A22B -tp 8"
FX = REPO / "tests" / "fixtures" / "metrics"
SMALL_TRACE = REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl"


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_issue_one_liner_prints_the_rule_id():
    r = _python("import kg; r = kg.check(kg.stack_from_command('vllm serve Qwen/Qwen3-235B-A22B -tp 8')); "
                "print(r.findings[0].rule_id)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "kv-head-replication\n"


def test_the_readme_example_runs_as_written():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("```python\nimport kg\n") + len("```python\n")
    code = text[start:text.index("```", start)]
    assert len(code.strip().splitlines()) == 5
    r = _python(code)
    assert r.returncode == 0, r.stderr
    # Qwen3-235B-A22B has 4 KV heads: at tp_size 8 each one is held by 2 ranks
    assert "kv-head-replication warning {'replication_factor': 2" in r.stdout


def test_import_kg_imports_nothing_heavy():
    r = _python("import sys, kg; heavy = [m for m in ('yaml', 'networkx', 'jsonschema', 'durable', 'kg.knowledge', "
                "'kg.inputs', 'kg.analyses', 'kg.engine', 'kg.cli') if m in sys.modules]; print(heavy)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[]\n"


def test_check_gives_the_findings_of_optkg_check(catalog):
    report = kg.check(kg.stack_from_command(CMD, catalog), catalog)
    code, out, err = run_cli("check", "--vllm", CMD, "--format", "json")
    assert code == 0, err
    assert json.loads(json.dumps(report.to_dict(), default=str))["findings"] == json.loads(out)["findings"]
    f = report.findings[0]
    assert (f.rule_id, f.severity) == ("kv-head-replication", "warning")
    assert f.numbers["replication_factor"] == 2


def test_stack_from_file_and_engine_detection(catalog):
    st = kg.stack_from_file(REPO / "examples" / "qwen3-235b-tp8.yaml", catalog)
    assert (st.values()["tp_size"], st.engine) == (8, "vllm")
    assert kg.kv(st)["layout"]["replication_factor"] == 2  # tp_size 8 from the technique's parameters
    sg = kg.stack_from_command("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 4", catalog)
    assert (sg.engine, sg.values()["tp_size"]) == ("sglang", 4)
    # a program the launch registry does not know (torchrun is a training launcher now: test below)
    with pytest.raises(kg.OptkgError, match="no known launch program in the command"):
        kg.stack_from_command("mytool serve Qwen/Qwen3-32B", catalog)
    with pytest.raises(kg.OptkgError, match="--vllm"):
        kg.stack_from_command("vllm serve Qwen/Qwen3-32B -tp zero", catalog, engine="vllm")


def test_kv_gives_what_optkg_kv_prints():
    d = kg.kv("Qwen/Qwen3-235B-A22B", tp_size=8, kv_budget_gib=40, max_model_len=32768)
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "8", "--kv-budget-gib", "40",
                             "--max-model-len", "32768", "--format", "json")
    assert code == 0, err
    assert d == json.loads(out)
    # 4 KV heads, 94 layers, head_dim 128, bf16: 2 (K,V) x 4 x 128 x 2 bytes x 94 = 192,512 bytes per token
    assert d["layout"]["bytes_per_token_model"] == 192_512
    assert d["layout"]["replication_factor"] == 2
    with pytest.raises(kg.OptkgError, match="tp_size"):
        kg.kv("Qwen/Qwen3-235B-A22B", tp_size=0)


def test_kv_reads_a_stack(catalog):
    d = kg.kv(kg.stack_from_command(CMD + " --kv-cache-dtype fp8", catalog))
    assert (d["layout"]["tp_size"], d["layout"]["kv_cache_dtype"]) == (8, "fp8")


def test_diagnose_gives_what_optkg_diagnose_prints():
    d = kg.diagnose([FX / "vllm_kv_pressure.prom"])
    code, out, err = run_cli("diagnose", str(FX / "vllm_kv_pressure.prom"), "--format", "json")
    assert code == 1, err
    assert json.loads(json.dumps(d, default=str)) == json.loads(out)
    assert d["walls"]["memory"]["fired"] is True
    with pytest.raises(kg.OptkgError, match="no metrics"):
        kg.diagnose([])


def test_fit_gives_what_optkg_fit_prints():
    d = kg.fit(SMALL_TRACE)
    code, out, err = run_cli("fit", str(SMALL_TRACE), "--format", "json")
    assert code == 0, err
    assert json.loads(json.dumps(d, default=str)) == json.loads(out)


def test_load_catalog_refuses_an_invalid_catalog(tmp_path):
    import shutil
    root = tmp_path / "cat"
    shutil.copytree(REPO / "tests" / "fixtures" / "catalogs" / "tiny", root)
    f = next(iter(sorted((root / "techniques").glob("*.yaml"))))
    f.write_text(f.read_text(encoding="utf-8").replace("id: ", "id: Not-An-Id-", 1), encoding="utf-8")
    with pytest.raises(kg.OptkgError, match=r"the catalog has \d+ problem\(s\)"):
        kg.load_catalog(root)
    assert isinstance(kg.load_catalog(Path(REPO / "tests" / "fixtures" / "catalogs" / "tiny")).techniques, dict)


@pytest.mark.parametrize("cmd, engine, tp", [
    ("trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8", "trtllm", 8),
    ("lmdeploy serve api_server Qwen/Qwen3-235B-A22B --tp 8", "lmdeploy", 8),
    ("docker run --gpus 8 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-235B-A22B --tensor-parallel-size 8", "vllm", 8),
    ("python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-235B-A22B -tp 4", "vllm", 4),
])
def test_stack_from_command_takes_every_launch_format_of_the_cmd_registry(catalog, cli, cmd, engine, tp):
    st = kg.stack_from_command(cmd, catalog)
    assert (st.engine, st.values()["tp_size"]) == (engine, tp)
    # the same findings as `optkg check --cmd`
    got = sorted((f.rule_id, f.severity) for f in kg.check(st, catalog).findings)
    d = json.loads(cli("check", "--cmd", cmd, "--format", "json")[1])
    assert got == sorted((f["rule_id"], f["severity"]) for f in d["findings"])


def test_stack_from_command_reads_a_training_launch_as_the_cli_does(catalog, cli):
    from kg.inputs.training.job import TrainingJob
    cmd = ("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --pipeline-model-parallel-size 16 "
           "--num-layers-per-virtual-pipeline-stage 2 --num-layers 80 --hidden-size 8192 --num-attention-heads 64")
    job = kg.stack_from_command(cmd, catalog, engine_version="0.16.1")
    assert isinstance(job, TrainingJob) and (job.framework, job.framework_version) == ("megatron", "0.16.1")
    report = kg.check(job, catalog)
    f = next(f for f in report.findings if f.rule_id == "training-vpp-layers-dropped")
    assert f.severity == "error" and report.to_dict()["kind"] == "training"
    d = json.loads(cli("check", "--cmd", cmd, "--framework-version", "0.16.1", "--format", "json")[1])
    assert sorted(x.rule_id for x in report.findings) == sorted(x["rule_id"] for x in d["findings"])


def test_stack_from_file_reads_what_check_file_reads(catalog):
    from kg.inputs.training.job import TrainingJob
    k8s = REPO / "tests/fixtures/launch/vllm-docs-k8s-deployment.yaml"
    mistral = REPO / "tests/fixtures/launch/mistral-7b-v0.3-config.json"
    st = kg.stack_from_file(k8s, catalog, config=mistral)
    assert st.engine == "vllm" and [s.name for s in kg.stacks_from_file(k8s, catalog, config=mistral)] == [st.name]
    job = kg.stack_from_file(REPO / "examples/llama-3.1-70b-megatron-train.yaml", catalog)
    assert isinstance(job, TrainingJob) and job.framework == "megatron"
    d = kg.check(job, catalog).to_dict()
    assert d["derived"]["memory"]["total_bytes"] == json.loads(
        run_cli("check", str(REPO / "examples/llama-3.1-70b-megatron-train.yaml"), "--format", "json")[1]
    )["derived"]["memory"]["total_bytes"]


def test_bundled_model_does_not_import_huggingface_hub(tmp_path):
    # resolving a bundled hub id with no models--<org>--<name> folder in the HF cache skips the hub library (about a
    # third of `optkg check`'s start-up); a cached repo is still found through it (tests/test_hf_cache.py)
    code = ("import sys; from kg.inputs.modelcfg import resolve_model; m = resolve_model('Qwen/Qwen3-32B'); "
            "print(m.name, 'huggingface_hub' in sys.modules)")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("HF_HUB_CACHE", "OPTKG_HF_DOWNLOAD")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "HF_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Qwen/Qwen3-32B", "False"]
