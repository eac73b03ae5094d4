"""vLLM V0 counts KV capacity in whole blocks and refuses a max_model_len above block_size x num_gpu_blocks
(vllm 0.6.4 worker/worker.py:486-504): rule max-model-len-exceeds-kv-blocks-v0."""
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
