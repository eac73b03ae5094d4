"""vLLM's scheduler defaults follow a budget the command gives (newuser7 #1, #2).

- From 0.10.1 a default max_num_seqs is clamped to max_num_batched_tokens (vllm 0.10.1 engine/arg_utils.py:1711,
  0.34.0 :3271 ``self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)``; 0.10.0 has no clamp), so
  ``--max-num-batched-tokens 512`` on an H100 runs 512 sequences and SchedulerConfig's budget >= max_num_seqs check
  passes; only a given ``--max-num-seqs`` above the budget is refused (batched-tokens-below-max-num-seqs).
- With ``--no-enable-chunked-prefill`` and no budget given, the default budget is raised to the model length
  (0.10.0 :1557 / 0.11.0 :1668 ``= model_config.max_model_len``; 0.14.0 :2002-2007 and 0.34.0 :3231-3236
  ``max(model_config.max_model_len, <the tier's budget>)``), so batched-tokens-below-max-model-len does not fire.
- ``--performance-mode throughput`` doubles both defaults first (0.29.0 :2904-2909, 0.34.0 :3220-3225)."""
import json

import pytest

from kg.cli import main

SEQS = "batched-tokens-below-max-num-seqs"
LEN = "batched-tokens-below-max-model-len"


def _check(cmd, gpu, version, capsys):
    code = main(["check", "--vllm", cmd, "--gpu", gpu, "--count", "2", "--no-speed", "--engine-version", version,
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    eff = {e["setting"]: (e["value"], e["source"]) for e in out["effective_config"]}
    return code, {f["rule_id"] for f in out["findings"]}, eff


@pytest.mark.parametrize("gpu, budget, seqs", [("H100", 1023, 1023), ("H100", 1024, 1024),
                                               ("L40S", 255, 255), ("L40S", 256, 256)])
def test_default_max_num_seqs_is_clamped_to_a_given_budget_and_nothing_fires(gpu, budget, seqs, capsys):
    code, fired, eff = _check(f"vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-batched-tokens {budget}", gpu,
                              "0.34.0", capsys)
    assert eff["max_num_seqs"] == (seqs, "engine default")
    assert SEQS not in fired and code == 0


def test_a_given_max_num_seqs_above_the_budget_still_fires(capsys):
    code, fired, eff = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-batched-tokens 1023 "
                              "--max-num-seqs 1024", "H100", "0.34.0", capsys)
    assert eff["max_num_seqs"] == (1024, "given") and SEQS in fired and code == 1


def test_no_clamp_before_0_10_1(capsys):
    _, _, eff = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-batched-tokens 512", "H100", "0.10.0", capsys)
    assert eff["max_num_seqs"] == (1024, "engine default")
    _, _, eff = _check("vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-batched-tokens 512", "H100", "0.10.1", capsys)
    assert eff["max_num_seqs"] == (512, "engine default")


def test_chunked_prefill_off_raises_the_default_budget_to_the_model_length(capsys):
    # Qwen3-32B: max_position_embeddings 40,960; H100 tier budget 8,192
    code, fired, eff = _check("vllm serve Qwen/Qwen3-32B -tp 2 --no-enable-chunked-prefill", "H100", "0.34.0", capsys)
    assert eff["max_num_batched_tokens"] == (40960, "engine default") and LEN not in fired
    _, _, eff = _check("vllm serve Qwen/Qwen3-32B --no-enable-chunked-prefill --max-model-len 4096", "H100", "0.34.0",
                       capsys)
    assert eff["max_num_batched_tokens"] == (8192, "engine default")  # max(4,096, 8,192)
    _, _, eff = _check("vllm serve Qwen/Qwen3-32B --no-enable-chunked-prefill --max-model-len 4096", "H100", "0.11.0",
                       capsys)
    assert eff["max_num_batched_tokens"] == (4096, "engine default")  # = max_model_len before 0.14.0


def test_throughput_mode_doubles_both_defaults_before_the_clamp(capsys):
    cmd = "vllm serve meta-llama/Meta-Llama-3.1-8B --performance-mode throughput"
    _, fired, eff = _check(cmd, "H100", "0.34.0", capsys)
    assert (eff["max_num_seqs"], eff["max_num_batched_tokens"]) == ((2048, "engine default"), (16384, "engine default"))
    _, fired, eff = _check(cmd + " --max-num-batched-tokens 1500", "H100", "0.34.0", capsys)
    assert eff["max_num_seqs"] == (1500, "engine default") and SEQS not in fired  # min(2 x 1,024, 1,500)
    _, _, eff = _check(cmd, "H100", "0.15.0", capsys)  # before the option: the flag is refused, defaults stay
    assert eff["max_num_seqs"][0] == 1024
