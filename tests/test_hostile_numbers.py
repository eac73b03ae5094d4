"""A number that cannot be what it claims is a one-line error naming the file, line and field, exit 2.

Engine logs, training TOML, baselines, config.json, YAML stack files and flags: 5,000-digit numbers,
nesting 100,000 deep, negative or NaN memory, a zero head_dim, Arabic-Indic digits, YAML's octal and hex
spellings. Never an internal error, never a value silently dropped or coerced. The reproducers of
../shared/reference/hostile_inputs_turn3.md carry their number there in the docstring.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs"
LOG_21348 = (LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log").read_text()
LOG_10517 = (LOGS / "vllm-10517-llama31-8b-rtx3090-20k.log").read_text()
Q = "Qwen/Qwen3-235B-A22B"
EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")
BIG = "9" * 5000


def one_line_error(code: int, err: str, *needles: str) -> str:
    """exit 2, stderr exactly one line ``optkg: error: ...`` holding each needle; returns the line."""
    assert code == 2, err[-600:]
    assert "internal error" not in err and "Traceback" not in err, err[-600:]
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("optkg: error: "), err[-900:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _log(tmp_path: Path, text: str, name: str = "big.log") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---- engine logs ------------------------------------------------------------------------------------

def test_a_5000_digit_kv_cache_size_in_a_log_is_an_error_in_reconcile_and_kv_budget_from(tmp_path):
    """hostile_inputs_turn3.md #8: ``GPU KV cache size: 9...9`` (5,000 digits) made reconcile and
    ``check --kv-budget-from`` end in ``OverflowError: cannot convert float infinity to integer``."""
    log = _log(tmp_path, re.sub(r"GPU KV cache size: [0-9,]+", f"GPU KV cache size: {BIG}", LOG_21348))
    code, out, err = run_cli("reconcile", log, "--vllm", f"vllm serve {Q} -tp 4")
    one_line_error(code, err, f"{log}:2: kv_cache_tokens", "5000 characters")
    code, out, err = run_cli("check", "--vllm", f"vllm serve {Q} -tp 4", "--kv-budget-from", log)
    one_line_error(code, err, f"{log}:2: kv_cache_tokens")


def test_a_5000_digit_v0_gpu_blocks_count_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #8 (V0 form): ``GPU blocks: 9...9``."""
    log = _log(tmp_path, re.sub(r"GPU blocks: [0-9]+", f"GPU blocks: {BIG}", LOG_10517))
    code, out, err = run_cli("reconcile", log, "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 20000")
    one_line_error(code, err, f"{log}:3: num_gpu_blocks")


@pytest.mark.parametrize("bad,why", [
    ("-5.00", "a negative number (-5.00)"),
    ("nan", "found nan"),
    ("inf", "found inf"),
    ("1e308", "found 1e308"),
    ("nanx", "found nanx"),
    ("0.00", "0 -- an engine that starts cannot have that"),
])
def test_a_malformed_kv_memory_in_a_log_is_an_error_not_a_dash(tmp_path, bad, why):
    """hostile_inputs_turn3.md #20: ``Available KV cache memory: -5.00 GiB`` (nan, inf, 1e308, 0.00, nanx) showed "-"
    in reconcile's row, with no note and exit 0."""
    log = _log(tmp_path, LOG_21348.replace("Available KV cache memory: 8.11 GiB", f"Available KV cache memory: {bad} GiB"))
    code, out, err = run_cli("reconcile", log, "--vllm", f"vllm serve {Q} -tp 4")
    one_line_error(code, err, f"{log}:1: kv_cache_memory", why)


def test_a_negative_gpu_block_count_is_an_error(tmp_path):
    """hostile_inputs_turn3.md #20: ``GPU blocks: -1952`` was dropped silently."""
    log = _log(tmp_path, LOG_10517.replace("GPU blocks: 1952", "GPU blocks: -1952"))
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 20000",
                             "--kv-budget-from", log)
    one_line_error(code, err, f"{log}:3: num_gpu_blocks", "negative")


def test_log_numbers_as_engines_print_them_still_read():
    from kg.inputs.logs.model import logged_number
    assert logged_number("178,880", "kv_cache_tokens", "x.log", 2, "") == 178_880
    assert logged_number("8.11", "kv_cache_memory", "x.log", 1, "") == 8.11
    assert logged_number("0.00", "cuda_graphs", "x.log", 1, "") == 0.0  # enforce-eager: no graphs is real
