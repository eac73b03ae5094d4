"""Labels in check's and kv's KV report: the DCP reason that applies, the longest request (no search sentinel, not
above the model's limit), tokens in flight only for window groups, the engine's KV block, MLA's latent."""
from __future__ import annotations

from conftest import REPO, run_cli as _run_cli

from report_text import unwrap


def run_cli(*argv):
    """The in-process CLI with the text's 100-column wrapping undone, for substring assertions."""
    code, out, err = _run_cli(*argv)
    return code, unwrap(out), err


MISTRAL = REPO / "tests/fixtures/field_cases/configs/mistral-7b-v0.1.json"


def test_dcp_line_names_the_reason_that_applies():
    code, out, err = run_cli("check", "--vllm", "vllm serve mistralai/Mistral-7B-v0.1", "--config", str(MISTRAL),
                             "--gpu", "H100-SXM")
    assert code in (0, 1), err
    flat = " ".join(out.split())  # the report wraps at 100 columns
    assert ("impossible here (32 of 32 layers use a sliding window (4,096 tokens), and vLLM refuses DCP with "
            "sliding-window layers)") in flat
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4", "--gpu", "H100-SXM",
                             "--count", "4")
    assert code in (0, 1), err
    assert "impossible here (needs tp_size > num_key_value_heads for GQA/MHA: tp 4, 8 KV heads)" in " ".join(out.split())


def test_kv_longest_request_is_no_sentinel_and_not_above_the_model_limit():
    code, out, err = run_cli("kv", "--config", str(MISTRAL), "--kv-budget-gib", "30", "--max-model-len", "32768")
    assert code == 0, err
    assert "2,147,483,648" not in out
    assert "any length up to max_model_len (32,768 tokens for this model)" in out
    # gpt-oss-120b at 10 GiB: the groups would hold 274,720 tokens, the config allows 131,072
    code, out, err = run_cli("kv", "--model", "openai/gpt-oss-120b", "--kv-budget-gib", "10", "--engine-version", "0.33.0")
    assert code == 0, err
    assert "131,072 tokens (the model's limit; KV memory alone would hold 274,720)" in out


def test_tokens_in_flight_only_for_window_groups():
    code, out, err = run_cli("kv", "--model", "meta-llama/Meta-Llama-3.1-8B", "--kv-budget-gib", "10",
                             "--engine-version", "0.33.0")  # 16-token blocks (64 from 0.34.0)
    assert code == 0, err
    assert "(8,192 full)" in out and "in flight" not in out
    code, out, err = run_cli("kv", "--config", str(MISTRAL), "--kv-budget-gib", "30", "--max-model-len", "32768",
                             "--pp", "2", "--engine-version", "0.33.0")
    assert code == 0, err
    assert "(1,793 sliding; 24,576 tokens in flight, V2 model runner)" in out


def test_techniques_line_shows_the_block_the_engine_uses():
    # DeepSeek-V3.2 sparse MLA: 64-token blocks (0.33.0 v1/attention/backends/mla/flashattn_mla_sparse.py:50-51)
    code, out, err = run_cli("check", "--vllm", "vllm serve deepseek-ai/DeepSeek-V3.2-Exp -tp 8", "--config",
                             str(REPO / "tests/fixtures/model_configs/deepseek-v3.2-exp.json"), "--gpu", "H200",
                             "--count", "8", "--engine-version", "0.33.0")
    assert code in (0, 1), err
    assert "paged-kv-cache(block_size=64 (engine; table 16)" in " ".join(out.split())


def test_kv_text_for_mla_shows_the_latent():
    code, out, err = run_cli("kv", "--model", "deepseek-ai/DeepSeek-V3", "--tp", "8")
    assert code == 0, err
    assert ("MLA, 128 query heads sharing one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements"
            in out)
    assert "KV heads" not in out.splitlines()[0] and "head_dim 56" not in out
