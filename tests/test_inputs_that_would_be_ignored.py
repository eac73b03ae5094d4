"""Inputs optkg would otherwise ignore or read as something else are one-line errors (exit 2), newuser6 #11 d-f:
an empty TOML was read as a default torchtitan 0.2.1 job ("15 rules held", exit 0); `--model` on a serving stack
file was dropped and the error said "add `model:`"; `--gpu H100 --gpu-memory-gib 94` sized an 80 GB H100."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

EMPTY_TOML = ("the TOML file holds no tables or keys: nothing to check (a torchtitan job config has [job], [model], "
              "[parallelism], [training], ...)\n")


@pytest.mark.parametrize("text", ["", "# a comment only\n\n"])
def test_an_empty_toml_is_nothing_to_check(tmp_path: Path, text: str):
    f = tmp_path / "e.toml"
    f.write_text(text)
    code, out, err = run_cli("check", str(f))
    assert (code, out, err) == (2, "", f"optkg: error: {f}:1: {EMPTY_TOML}")


def test_a_toml_with_one_key_is_read_as_a_torchtitan_job(tmp_path: Path):
    f = tmp_path / "t.toml"
    f.write_text("[training]\nseq_len = 4096\n")
    code, out, err = run_cli("check", str(f), "--no-speed")
    assert code == 0 and err == "" and "framework: torchtitan 0.2.1" in out


def test_model_flag_on_a_serving_stack_file_is_refused_not_dropped(tmp_path: Path):
    f = tmp_path / "emp.json"
    f.write_text("{}\n")
    code, out, err = run_cli("check", str(f), "--model", "Qwen/Qwen3-32B")
    assert (code, out) == (2, "")
    assert err == ("optkg: error: --model is the training job's model (--train or a training file); a serving stack "
                   "names its model in `model:`, in the launch command, or with --config\n")
    code, _, err = run_cli("check", str(f))  # without --model the stack's own gap is named
    assert (code, err) == (2, f"optkg: error: {f}: the stack names no model (add `model:` or pass --config)\n")


def test_training_batch_flags_on_a_serving_stack_are_refused():
    code, out, err = run_cli("check", "examples/qwen3-235b-tp8.yaml", "--seq-length", "4096", "--no-speed")
    assert (code, out) == (2, "")
    assert err == ("optkg: error: --seq-length: training-job flag(s) (--train or a training file); a serving check "
                   "takes the request lengths with --isl/--osl or --request-len\n")


def test_memory_flag_for_a_catalog_gpu_is_refused_and_taken_for_a_new_one():
    code, out, err = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--gpu", "H100", "--gpu-memory-gib", "94")
    assert (code, out) == (2, "")
    assert err == ("optkg: error: --gpu-memory-gib 94: H100 is the catalog's H100-SXM (80 GB, 79.65 GiB visible), "
                   "which keeps its own memory; drop --gpu-memory-gib, or give a GPU the catalog lacks a name of its "
                   "own (e.g. --gpu H100-NVL --gpu-memory-gib 94)\n")
    code, out, _ = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--gpu", "H100-NVL", "--gpu-memory-gib", "94",
                           "--format", "json")
    import json
    requested = json.loads(out)["kv_budget"]["lines"][0]
    assert code == 0 and requested["bytes"] == 94 * 2**30 == 100_931_731_456
