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
    with pytest.raises(kg.OptkgError, match="not a vLLM or SGLang launch command"):
        kg.stack_from_command("torchrun train.py", catalog)
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
