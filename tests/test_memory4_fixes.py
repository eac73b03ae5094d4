"""Issue 13 tester findings (tester-3 report, session 4, lane memory4), each with the value worked out by hand
or read from the engine's released source.

1. vLLM V0 refuses a max_model_len above block_size x num_gpu_blocks (vllm 0.6.4 worker/worker.py:486-504):
   rule max-model-len-exceeds-kv-blocks-v0, and V0's capacity counted in whole blocks (tester item 1, 15).
"""
from __future__ import annotations

import json

from conftest import REPO, run_cli

LOGS = REPO / "tests/fixtures/logs"
LOG_10517 = LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log"
CMD_29K = "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 29000"


def _check(*args: str) -> dict:
    code, out, err = run_cli("check", "--vllm", CMD_29K, "--gpu", "RTX-3090", "--engine-version", "0.6.4", *args,
                             "--format", "json")
    assert code == 1, err  # an error finding
    return json.loads(out)


def test_v0_refusal_fires_on_optkgs_own_budget():
    d = _check()
    # V0 counts whole blocks. The RTX 3090 as vLLM sees it (catalog memory_visible_mib 24,146 = the log's 23.58 GiB;
    # was the vendor's 24 GiB: 1,692 blocks): ceil(24,146 MiB x 0.9) = 22,787,024,487 B - weights 16,059,990,016
    # - activation 3,207,168,000 - non-torch 375,809,638 = 3,144,056,832 B / 2 MiB per block = 1,499.2 -> 1,499
    # blocks x 16 = 23,984 tokens (the log: 1,478), 23,984 / 29,000 = 0.83
    assert d["derived"]["kv_num_blocks"] == 1499
    assert d["derived"]["kv_tokens_per_gpu"] == 23984 and d["derived"]["max_concurrency"] == 0.83
    f = {x["rule_id"]: x for x in d["findings"]}["max-model-len-exceeds-kv-blocks-v0"]
    assert f["severity"] == "error"
    assert f["numbers"] == {"max_model_len": 29000, "kv_token_limit": 23984, "num_gpu_blocks": 1499, "block_size": 16}


def test_v0_refusal_fires_with_the_logged_blocks_of_vllm_10517():
    d = _check("--count", "1", "--kv-budget-from", str(LOG_10517))
    # the log: "# GPU blocks: 1478" and "... larger than the maximum number of tokens that can be stored in
    # KV cache (23648)" = 1,478 x 16; "Maximum concurrency for 29000 tokens per request: 0.82x"
    assert d["derived"]["kv_num_blocks"] == 1478
    assert d["derived"]["kv_tokens_per_gpu"] == 23648 and d["derived"]["max_concurrency"] == 0.82
    f = {x["rule_id"]: x for x in d["findings"]}["max-model-len-exceeds-kv-blocks-v0"]
    assert f["numbers"]["kv_token_limit"] == 23648 and f["numbers"]["num_gpu_blocks"] == 1478
    assert "(29000) is larger than the maximum number of tokens that can be stored in KV cache (23648)" in f["message"]


def test_capacity_uses_the_kv_dtype_the_engine_stores_when_fp8_is_ignored():
    # tester item 6: vLLM 0.7.3 V1 FLASH_ATTN keeps a 16-bit cache for --kv-cache-dtype fp8
    # (rule fp8-kv-ignored-by-flash-attn); Llama-3.1-8B BF16 KV = 32 layers x 8 heads x 128 x 2 x 2 B = 131,072 B/token
    cmd = ("VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND=FLASH_ATTN vllm serve meta-llama/Meta-Llama-3.1-8B "
           "--kv-cache-dtype fp8")
    code, out, err = run_cli("check", "--vllm", cmd, "--gpu", "H100", "--count", "1", "--engine-version", "0.7.3",
                             "--format", "json")
    assert code == 1, err
    d = json.loads(out)
    f = {x["rule_id"]: x for x in d["findings"]}["fp8-kv-ignored-by-flash-attn"]
    assert f["numbers"]["kv_bytes_per_token_per_gpu_actual"] == 131072
    assert f["numbers"]["kv_bytes_per_token_per_gpu_expected"] == 65536
    dv = d["derived"]
    # the table follows the actual 131,072 B/token: 16 x 131,072 = 2 MiB blocks, half the FP8 count
    # (42,430 FP8 blocks -> 21,215; 21,215 x 16 = 339,440 tokens; 21,215 / 8,192 blocks per 131,072-token request = 2.59)
    assert dv["kv_bytes_per_token_per_gpu"] == 131072 and dv["kv_bytes_per_token_per_gpu_requested"] == 65536
    assert dv["kv_num_blocks"] == 21215 and dv["kv_tokens_per_gpu"] == 339440 and dv["max_concurrency"] == 2.59
    assert any("KV capacity at the dtype the engine stores (auto: bfloat16)" in n for n in d["notes"])


def test_api_kv_checks_its_numbers_like_the_cli():
    # tester item 9: nan / inf budgets and a nan max_model_len were raw ValueErrors; "10" built a 2 GiB string
    import pytest

    import kg
    for kw, msg in (({"kv_budget_gib": float("nan")}, "kv: kv_budget_gib: expected a finite number, found nan"),
                    ({"kv_budget_gib": float("inf")}, "kv: kv_budget_gib: expected a finite number, found inf"),
                    ({"kv_budget_gib": -1}, "kv: kv_budget_gib: expected a value >= 0, found -1"),
                    ({"max_model_len": float("nan")}, "kv: max_model_len: expected an integer, found nan")):
        with pytest.raises(kg.OptkgError) as e:
            kg.kv("Qwen/Qwen3-32B", **kw)
        assert str(e.value) == msg
    # a numeric string is read the way a stack file's value is: Qwen3-32B 64 layers x 8 KV heads x 128 x 2 x 2 B
    # = 262,144 B/token; 10 GiB / 262,144 = 40,960 tokens
    assert kg.kv("Qwen/Qwen3-32B", kv_budget_gib="10")["capacity"]["kv_tokens_per_gpu"] == 40960


def test_stack_file_without_utilization_labels_the_engine_default(tmp_path):
    # tester item 16: the budget said "given (...)" while the effective configuration said 0.92 engine default
    stack = tmp_path / "stack.yaml"
    stack.write_text("model: Qwen/Qwen3-235B-A22B\nengine: {name: vllm, version: '0.33.0'}\nhardware: {gpu: H200, count: 8}\n"
                     "techniques:\n  - tensor-parallelism: {tp_size: 8}\n  - paged-kv-cache\nsettings:\n  max_model_len: 32768\n")
    code, out, err = run_cli("check", str(stack), "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    want = "vllm 0.33.0 default: vllm >=0.20.0 default (vllm/config/cache.py:66 at vllm 0.20.0)"
    assert d["derived"]["kv_budget_gpu_memory_utilization"] == 0.92
    assert d["derived"]["kv_budget_utilization_source"] == want
    assert d["derived"]["kv_budget_breakdown"][0]["source"].endswith(want)
    eff = {e["setting"]: e for e in d["effective_config"]}["gpu_memory_utilization"]
    assert eff["source"] == "engine default" and eff["value"] == 0.92
    # given in the file: still 'given'
    stack.write_text(stack.read_text() + "  gpu_memory_utilization: 0.9\n")
    code, out, err = run_cli("check", str(stack), "--format", "json")
    d = json.loads(out)
    assert d["derived"]["kv_budget_utilization_source"].startswith("given (")
    assert d["derived"]["kv_budget_gpu_memory_utilization"] == 0.9


def test_sglang_dp_attention_total_is_labelled_by_dp_and_reconcile_header_names_the_engine_once():
    # tester item 17: the total multiplies one pool by dp_size (8 schedulers), not by dcp
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                             "--tp 8 --dp 8 --enable-dp-attention", "--gpu", "H200", "--count", "8")
    assert code in (0, 1), err
    # 240,978 per pool x 8; the static pool is 141 GiB x SGLang's computed 0.759 (reserve 34,816 MiB under DP
    # attention, kg.derive.sglang_memfrac; was the flat 0.88 -> 501,666 per pool): changed on purpose
    assert "KV tokens, all pools (x dp 8)              1,927,824" in out
    assert "scheduler-wide (x dcp)" not in out
    code, out, err = run_cli("reconcile", str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"))
    assert code == 0, err
    assert out.splitlines()[0] == f"optkg reconcile: {LOGS / 'sglang-21348-qwen3-235b-fp8-tp4.log'}  (sglang)"


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
