"""A KV budget per GPU above the GPU's memory is refused (exit 2, one line naming the GPU's memory) by every
command that takes one (check, kv, fit, sweep), and bounded by MAX_KV_BUDGET_GIB when no GPU is given.

H100-SXM: catalog/hardware/H100-SXM.yaml memory_visible_mib 81,559 -> 81,559 / 1,024 = 79.65 GiB.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from kg.inputs.settingcheck import MAX_KV_BUDGET_GIB

ROOT = Path(__file__).resolve().parents[1]
H100_MSG = ("--kv-budget-gib: 500 GiB of KV cache per GPU is more than the H100-SXM's 79.65 GiB of memory; "
            "give the KV budget of one GPU in GiB")
TRACE = ROOT / "rules" / "fixtures" / "traces" / "small_prefix.jsonl"


def one_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "", (code, out[:300])
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("argv", [
    ("check", "--vllm", "vllm serve Qwen/Qwen3-32B -tp 2", "--gpu", "H100", "--count", "2", "--kv-budget-gib", "500",
     "--no-speed"),
    ("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--kv-budget-gib", "500", "--gpu", "H100", "--count", "2"),
    ("sweep", "--vllm", "vllm serve Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100", "--count", "2",
     "--kv-budget-gib", "500", "--no-speed"),
], ids=["check", "kv", "sweep"])
def test_budget_above_the_gpu_memory_is_refused_naming_it(argv):
    assert one_error(*run_cli(*argv)) == f"optkg: error: {H100_MSG}"


def test_fit_refuses_a_budget_above_the_gpu_memory():
    line = one_error(*run_cli("fit", str(TRACE), "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100",
                              "--kv-budget-gib", "500"))
    assert line.endswith(H100_MSG), line


def test_budget_without_a_gpu_is_bounded_by_the_largest_accepted():
    line = one_error(*run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--kv-budget-gib", "1e12"))
    assert line == ("optkg: error: --kv-budget-gib: 1e+12 GiB of KV cache per GPU is more than any GPU holds "
                    "(optkg takes at most 1,024 GiB); give the KV budget of one GPU in GiB")


def test_budget_equal_to_the_gpu_memory_is_taken():
    # 79.65 GiB rounds 81,559 MiB down (79.6474...); 79.64 GiB is below it and runs
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--kv-budget-gib", "79.64",
                             "--gpu", "H100", "--count", "2")
    assert code == 0, err
    code, _, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--kv-budget-gib", "79.65",
                           "--gpu", "H100", "--count", "2")
    assert code == 2 and "79.65 GiB of memory" in err


def test_a_stack_file_budget_above_its_gpu_is_refused(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nengine: {name: vllm}\nmodel: Qwen/Qwen3-32B\nhardware: {gpu: H100, count: 2}\n"
                 "techniques:\n  - tensor-parallelism: {tp_size: 2}\nsettings: {kv_budget_gib: 100}\n")
    line = one_error(*run_cli("check", str(f), "--no-speed"))
    assert line == (f"optkg: error: {f}: kv_budget_gib: 100 GiB of KV cache per GPU is more than the H100-SXM's "
                    "79.65 GiB of memory; give the KV budget of one GPU in GiB")


def test_largest_accepted_budget_is_above_every_gpu_in_the_catalog():
    mems = {}
    for f in (ROOT / "catalog" / "hardware").glob("*.yaml"):
        hw = yaml.safe_load(f.read_text())
        gib = hw["memory_visible_mib"] / 1024 if hw.get("memory_visible_mib") else hw.get("memory_gib")
        mems[hw["id"]] = gib
    assert max(mems.values()) == 288  # MI355X
    assert MAX_KV_BUDGET_GIB > max(mems.values())
