"""``--max-model-len auto`` / ``-1`` (vLLM >= 0.14.0) is vLLM's auto-fit, not "not given" (newuser6 #1): vLLM keeps
the model's length when one request of it fits and else lowers max_model_len to the longest that fits (0.34.0
v1/core/kv_cache_planning.py:1381-1500, called at :1647 when original_max_model_len == -1)."""
from __future__ import annotations

import json

from conftest import run_cli


def _check(length: str | None, gpu: str) -> tuple[int, dict]:
    cmd = "vllm serve meta-llama/Meta-Llama-3.1-8B" + (f" --max-model-len {length}" if length else "")
    code, out, err = run_cli("check", "--vllm", cmd, "--gpu", gpu, "--count", "1", "--no-speed", "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def _mml(rep: dict) -> dict:
    return [e for e in rep["effective_config"] if e["setting"] == "max_model_len"][0]


def test_max_model_len_auto_is_the_longest_that_fits_not_an_error():
    # L4 (22.49 GiB): ~5.3 GiB of KV at 131,072 B/token; 131,072 tokens need 16 GiB. vLLM fits 43,008 tokens
    # (672 blocks of 64 after the null block); was ERROR max-model-len-exceeds-kv-capacity, "not given"
    for word in ("auto", "-1"):
        code, rep = _check(word, "L4")
        d = rep["derived"]
        assert code == 0 and rep["findings"] == []
        assert d["max_model_len_effective"] == d["max_model_len_that_fits"] == 43_008
        assert d["max_concurrency_at_max_model_len_effective"] == 1.0
        assert _mml(rep)["value"] == 43_008 and _mml(rep)["source"] == "given: auto"
        assert "lowers it from the model's 131,072" in d["max_model_len_source"]


def test_max_model_len_auto_keeps_the_full_length_when_it_fits():
    code, rep = _check("auto", "H100-SXM")
    assert code == 0 and rep["derived"]["max_model_len_effective"] == 131_072
    assert rep["derived"]["max_model_len_source"] == "--max-model-len auto: the model's full 131,072 fit in the KV cache"


def test_max_model_len_not_given_still_refuses_when_it_does_not_fit():
    code, rep = _check(None, "L4")
    assert code == 1
    assert [f["rule_id"] for f in rep["findings"]] == ["max-model-len-exceeds-kv-capacity"]
    assert rep["derived"]["max_model_len_effective"] == 131_072
    # the fix offers auto where the release has it (0.14.0 engine/arg_utils.py:301), not before
    assert rep["findings"][0]["fix"].startswith(
        "lower --max-model-len to 43,008 or less (--max-model-len auto: vLLM sets the longest that fits at start), ")
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B", "--gpu", "L4", "--count",
                             "1", "--engine-version", "0.11.0", "--no-speed", "--format", "json")
    fix = json.loads(out)["findings"][0]["fix"]
    assert fix.startswith("lower --max-model-len to 33,424 or less, or give") and "auto" not in fix
