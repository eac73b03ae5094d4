"""optkg reconcile and check --kv-budget-from on real startup logs (tests/fixtures/logs/SOURCES.md)."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli
from kg.core.errors import OptkgError
from kg.engines.logs import read_startup_log
from kg.inputs.logs import GIB

LOGS = REPO / "tests/fixtures/logs"
QWEN_FP8 = str(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-fp8.json")
VLLM_21348 = ("vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4 "
              "--kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'")
SGLANG_21348 = ("python3 -m sglang.launch_server --model Qwen/Qwen3-235B-A22B-FP8 --tp 4 --trust-remote-code "
                "--mem-fraction-static 0.93")


def reconcile_json(*argv: str) -> dict:
    code, out, err = run_cli("reconcile", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def rows(d: dict, i: int = 0) -> dict[str, dict]:
    return {r["quantity"]: r for r in d["logs"][i]["rows"]}


def test_v0_log_values():
    log = read_startup_log(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log")
    assert (log.engine, log.generation) == ("vllm", "v0")
    assert log.get("num_gpu_blocks") == 1478 and log.get("kv_token_limit") == 23648
    assert log.get("kv_cache_memory") == 2.89 * GIB and log.get("max_concurrency") == 0.82


def test_10517_reproduces_the_23648_token_limit_and_the_gap_to_optkg():
    d = reconcile_json(str(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log"),
                       "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 29000")
    r = rows(d)
    # V0: # GPU blocks x block_size = 1,478 x 16
    assert r["KV token limit (# GPU blocks x block_size)"]["reproduced"] == 23_648 == \
        r["KV token limit (# GPU blocks x block_size)"]["logged"]
    # total x utilization - peak_torch - non_torch = (23.58 x 0.9 - 17.98 - 0.35) GiB = 2.892 GiB
    assert r["KV cache memory"]["reproduced"] == pytest.approx((23.58 * 0.9 - 17.98 - 0.35) * GIB)
    # optkg's own budget: 23.58 GiB x 0.9 - 16,059,990,016 B weights - 29,000 x (3 x 14,336 + 3 x 4,096) x 2 B
    # activation (3,207,168,000 B) - 0.35 GiB non-torch
    own = 23.58 * 0.9 * GIB - 16_059_990_016 - 3_207_168_000 - 0.35 * GIB
    assert r["KV cache memory"]["estimated"] == pytest.approx(own)
    assert r["KV token limit (# GPU blocks x block_size)"]["estimated"] == (own // 2_097_152) * 16 == 23_984
    assert r["activation peak (peak_torch - weights)"]["estimated"] == 3_207_168_000
    assert any("does not fit" in n for n in d["logs"][0]["notes"])


def test_21348_reproduces_both_engines_and_explains_the_2x():
    d = reconcile_json(str(LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log"), str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"),
                       "--vllm", VLLM_21348, "--sglang", SGLANG_21348, "--config", QWEN_FP8, "--gpu", "H100-SXM",
                       "--engine-version", "0.10.0")
    v, s = rows(d, 0), rows(d, 1)
    # vLLM: floor(8.11 GiB / (16 x 94 x 1 x 256 x 2 B = 770,048 B)) = 11,308 blocks; 40,960 / 16 = 2,560 blocks per
    # request; int(11,308 / 2,560 x 40,960) = 180,928 vs the logged 178,880 (+1.14 %)
    assert v["GPU KV cache size"]["reproduced"] == 180_928
    assert abs(v["GPU KV cache size"]["reproduced_diff_pct"]) < 1.5
    # SGLang: 8.23 GiB / (94 x 1 x 128 x 2 B) = 367,224 rows - page_size 1 = 367,223 vs 367,404 (-0.05 %)
    assert s["#tokens"]["reproduced"] == 367_223
    assert abs(s["#tokens"]["reproduced_diff_pct"]) < 0.5
    # optkg's own estimate sits beside each logged number
    assert v["KV cache memory"]["estimated"] is not None and s["#tokens"]["estimated"] is not None
    # optkg's own vLLM budget (kg.derive.budget at 0.10.0): 0.9 x 79.65 GiB - 55.05 GiB weights - sampler 1,024 x
    # 151,936 x 28 B (4.06 GiB) - 3.58 GiB non-torch (TP 4 on an 80 GB GPU) = 8.99 GiB vs 8.11 logged (+10.9 %)
    assert v["KV cache memory"]["estimated"] / GIB == pytest.approx(8.9942, abs=1e-4)
    comp = " ".join(d["comparison"])
    assert "2.03x" in comp                      # 16.46 / 8.11
    assert "+2.39 GiB for SGLang" in comp       # (0.93 - 0.90) x 79.65 GiB
    assert "activation peak" in comp


def test_v1_breakdown_line_is_read():
    log = read_startup_log(LOGS / "vllm-club3090-1087-tp2-breakdown.log")
    assert log.generation == "v1"
    assert log.get("activation_peak") == 1.59 * GIB and log.get("cuda_graphs") == 0.09 * GIB
    assert log.get("consumed") == 15.03 * GIB and log.get("kv_cache_memory") == 12.26 * GIB


def test_check_kv_budget_from_log():
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 29000",
                             "--kv-budget-from", str(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log"), "--format", "json",
                             "--engine-version", "0.33.0")  # V1 arithmetic with 16-token blocks (64 from 0.34.0)
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["derived"]["kv_budget_bytes_per_gpu"] == round(2.89 * GIB)
    # vLLM V1 arithmetic on that budget: 1,479 blocks / cdiv(29,000, 16) = 1,813 -> 0.82x
    assert d["derived"]["max_concurrency"] == 0.82
    assert "max-model-len-exceeds-kv-capacity" in {f["rule_id"] for f in d["findings"]}


def test_bad_logs_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("INFO starting\n")
    code, out, err = run_cli("reconcile", str(empty))
    assert code == 2 and err.count("\n") == 1 and "no vLLM or SGLang KV-cache sizing line" in err
    code, out, err = run_cli("reconcile", str(tmp_path / "missing.log"))
    assert code == 2 and err.startswith("optkg: error:")
    with pytest.raises(OptkgError, match="names no KV-cache memory"):
        from kg.analyses.reconcile import logged_kv_budget
        p = tmp_path / "tokens.log"
        p.write_text("GPU KV cache size: 1,000 tokens\n")
        logged_kv_budget(read_startup_log(p))


def test_kv_budget_from_refuses_the_other_engines_log():
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B",
                             "--kv-budget-from", str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "a sglang startup log for a vllm stack" in err and "sglang-21348" in err
    code, out, err = run_cli("check", "--sglang", "python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B",
                             "--kv-budget-from", str(LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log"))
    assert code == 2 and "a vllm startup log for a sglang stack" in err


def test_reconcile_refuses_another_models_log_and_names_the_engine_it_lacks():
    # tester-4 #13: the 10517 Llama-8B log against a Qwen3-235B command was compared (weights +630 %) without a
    # word; now one line, exit 2 (as check --kv-budget-from), unless --accept-log-mismatch
    from conftest import REPO, run_cli
    logs = REPO / "tests" / "fixtures" / "logs"
    code, out, err = run_cli("reconcile", str(logs / "vllm-10517-llama31-8b-rtx3090-29k.log"), "--vllm",
                             "vllm serve Qwen/Qwen3-235B-A22B -tp 4", "--gpu", "H100")
    assert code == 2 and "the log is not of the --vllm command's stack" in err and "131,221 B per token" in err
    code, out, err = run_cli("reconcile", str(logs / "vllm-10517-llama31-8b-rtx3090-29k.log"), "--vllm",
                             "vllm serve Qwen/Qwen3-235B-A22B -tp 4", "--gpu", "H100", "--accept-log-mismatch")
    assert code == 0, err
    # an SGLang log with only a --vllm command: the note says which command it needs
    code, out, err = run_cli("reconcile", str(logs / "sglang-21348-qwen3-235b-fp8-tp4.log"), "--vllm",
                             "vllm serve Qwen/Qwen3-235B-A22B -tp 4")
    assert code == 0 and "this is a sglang log and only a --vllm command was given" in out
    assert "no --vllm/--sglang command" not in out
