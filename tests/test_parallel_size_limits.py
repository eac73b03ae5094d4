"""check, kv, fit and stack files refuse parallel sizes no engine starts with, before any work is done.

Every number is worked by hand next to it from the bundled config.json files (catalog/models/)."""
from __future__ import annotations

import json

import pytest

from cli_helpers import model, one_line_error
from conftest import REPO, run_cli
from kg.core.errors import OptkgError

SMALL_AZURE = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


def test_huge_tp_in_a_command_is_refused_at_once():
    # refused while parsing the flag (the message names its ceiling), before any loop over tp could run
    code, _, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 99999999999999999999")
    line = one_line_error(code, err)
    assert "--tensor-parallel-size: expected a value <= 65536" in line


def test_valid_dcp_sizes_walk_only_divisors():
    from kg.derive.kv import divisors, valid_dcp_sizes
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert divisors(1) == [1] and divisors(0) == []
    # Qwen3-235B (64 query heads, 4 KV heads) at tp 65,536: dcp must divide 65,536, be <= 65,536 // 4 = 16,384
    # and divide 64 / 4 = 16 -> {1, 2, 4, 8, 16}; before the fix this looped 65,536 times per call
    assert valid_dcp_sizes(model("Qwen/Qwen3-235B-A22B"), 65_536) == [1, 2, 4, 8, 16]
    # MLA: every divisor of tp (D1 only): 2**40 has 41 divisors
    assert len(valid_dcp_sizes(model("deepseek-ai/DeepSeek-V3"), 2**40)) == 41
    # the work, counted (not timed): one trial division per i with i*i <= n, i.e. floor(sqrt(n)) of them
    from kg.core.intmath import _divisors

    class Counting(int):
        calls = 0

        def __mod__(self, other):
            Counting.calls += 1
            return int(self) % other
    for n, steps in ((65_536, 256), (2**40, 2**20)):
        Counting.calls = 0
        assert len(_divisors.__wrapped__(Counting(n))) == n.bit_length()  # 2**k has k + 1 divisors
        assert Counting.calls == steps


@pytest.mark.parametrize("argv, needle", [
    (["--tp", "10000000"], "--tp: 10000000 does not divide num_attention_heads 64 of Qwen/Qwen3-235B-A22B; "
                           "valid tp sizes: 1, 2, 4, 8, 16, 32, 64"),
    (["--tp", "3"], "--tp: 3 does not divide num_attention_heads 64"),
    (["--pp", "200"], "--pp: 200 pipeline stages for 94 layers of Qwen/Qwen3-235B-A22B; pp_size must be at most 94"),
])
def test_kv_refuses_parallel_sizes_no_engine_starts(argv, needle):
    code, _, err = run_cli("kv", "--model", "Qwen/Qwen3-235B-A22B", *argv)
    assert needle in one_line_error(code, err)


def test_kv_refuses_tp_that_kv_heads_cannot_follow():
    # Qwen2-7B: 28 query heads, 4 KV heads; tp 7 divides 28 but neither 7 | 4 nor 4 | 7
    code, _, err = run_cli("kv", "--config", str(REPO / "tests/fixtures/field_cases/configs/qwen2-7b.json"), "--tp", "7")
    assert "do not divide each other" in one_line_error(code, err)


def test_parallel_sizes_in_stack_files_are_capped(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="expected a value <= 65536"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "techniques": [{"tensor-parallelism": {"tp_size": 70000}}]}, catalog)
    with pytest.raises(OptkgError, match="expected a value <= 65536"):
        stack_from_mapping({"model": "Qwen/Qwen3-235B-A22B", "settings": {"dp_size": 70000}}, catalog)


def test_tp_that_does_not_divide_the_heads_is_refused():
    code, _, err = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "3")
    assert code == 2
    assert ("--tp: 3 does not divide num_attention_heads 64 of Qwen/Qwen3-235B-A22B; "
            "valid tp sizes: 1, 2, 4, 8, 16, 32, 64") in err
    # the same message as `optkg kv`
    code_kv, _, err_kv = run_cli("kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "3")
    assert code_kv == 2 and err_kv == err


def test_tp_16_is_valid_for_4_kv_heads_as_in_optkg_kv():
    # 16 divides 64 query heads and is a multiple of 4 KV heads (each KV head replicated 4x): kv accepts it
    code, out, _ = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "16", "--format", "json")
    assert code == 0
    assert json.loads(out)["model"]["tp_size"] == 16


def test_pp_larger_than_layers_refused():
    code, _, err = run_cli("fit", str(SMALL_AZURE), "--model", "meta-llama/Llama-3.1-8B", "--pp", "33")
    assert code == 2
    assert "--pp: 33 pipeline stages for 32 layers of meta-llama/Meta-Llama-3.1-8B; pp_size must be at most 32" in err
