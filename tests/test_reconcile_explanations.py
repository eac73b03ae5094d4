"""reconcile's explanations state the formula with the numbers it prints, and check --kv-budget-from shows the
log's own token count beside optkg's."""
from __future__ import annotations

import json

from conftest import REPO, run_cli

LOGS = REPO / "tests/fixtures/logs"


def _reconcile(*argv):
    code, out, err = run_cli("reconcile", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_reconcile_v1_explanation_matches_its_numbers():
    d = _reconcile(str(LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log"), "--vllm",
                   "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4", "--config",
                   str(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-fp8.json"), "--gpu", "H100-SXM",
                   "--engine-version", "0.10.0")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    # floor(8.11 GiB / 770,048 B) = 11,308 blocks; int(11,308 / 2,560 x 40,960) = 180,928 (the unrounded 4.4172,
    # not the 4.42 shown: 4.42 x 40,960 would be 181,043)
    size = r["GPU KV cache size"]
    assert size["reproduced"] == 180_928 == 11_308 * 16
    assert "int(num_blocks / blocks per request x max_model_len) = int(11,308 / 2,560 x 40,960) = 180,928" in size["explanation"]
    conc = r["max concurrency at 40,960 tokens"]
    assert conc["reproduced"] == 4.42 and "(11,308 / 2,560 = 4.4172)" in conc["explanation"]


def test_reconcile_v0_and_sglang_explanations_match_their_numbers():
    d = _reconcile(str(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log"), "--vllm",
                   "vllm serve meta-llama/Llama-3.1-8B --max-model-len 29000")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    assert "= 23.58 x 0.9 - 17.98 - 0.35 GiB = 2.892 GiB" in r["KV cache memory"]["explanation"]
    assert r["GPU blocks"]["reproduced"] == 1_479  # floor(2.89 x 2^30 / 2,097,152) = floor(1,479.68)
    assert "reproduced from the logged 2.89 GiB = 1,479" in r["GPU blocks"]["explanation"]
    assert "= 1,478 x 16 / 29,000 = 0.8154" in r["max concurrency at 29,000 tokens"]["explanation"]
    d = _reconcile(str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"), "--sglang",
                   "python3 -m sglang.launch_server --model Qwen/Qwen3-235B-A22B-FP8 --tp 4 --mem-fraction-static 0.93",
                   "--config", str(REPO / "tests/fixtures/field_cases/configs/qwen3-235b-a22b-fp8.json"), "--gpu", "H100-SXM")
    r = {x["quantity"]: x for x in d["logs"][0]["rows"]}
    # 8.23 x 2^30 / (94 layers x 1 head x 128 x 2 B) = 367,224.9 -> 367,224 - page 1
    assert r["#tokens"]["reproduced"] == 367_223
    assert "floor(8.23 GiB / (94 x 1 x 128 x 2 B)) - 1 = 367,223" in r["#tokens"]["explanation"]


def test_kv_budget_from_shows_the_logged_token_count_beside_optkgs():
    # tester item 15: vLLM issue 21348 logs "GPU KV cache size: 178,880 tokens"; optkg's count from the logged
    # 8.11 GiB is 180,928 (the log rounds the memory to 0.01 GiB): both are shown
    log = LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log"
    code, out, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 4 --max-model-len 40960",
                             "--kv-budget-from", str(log), "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["derived"]["kv_tokens_per_gpu"] == 180928
    assert (f"the log's GPU KV cache size: 178,880 tokens ({log}:2); the KV tokens in the table are optkg's from the "
            "logged KV memory") in d["notes"]
