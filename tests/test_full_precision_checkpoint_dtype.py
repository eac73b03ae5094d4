"""A float32 checkpoint under --dtype auto runs in 16 bits on vLLM and SGLang: weights and KV sized at 2 bytes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from report_text import cli  # noqa: F401  (the CLI with the report's wrapping undone)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def fp32_qwen3_8b(tmp_path):
    # Qwen3-8B's own config.json with torch_dtype float32, as HF Trainer saves an uncast fine-tune
    d = json.loads((REPO / "catalog" / "models" / "Qwen__Qwen3-8B.json").read_text())
    d["torch_dtype"] = "float32"
    (tmp_path / "config.json").write_text(json.dumps(d))
    return str(tmp_path)


@pytest.mark.parametrize("engine,cmd,gpu,to", [
    # vLLM 0.34.0 config/model.py:2484-2486 downcasts to the platform's first dtype (platforms/cuda.py:298-304:
    # bfloat16 from SM80, float16 on SM75); SGLang 0.5.23 configs/model_config.py:2303-2319: float16
    ("vllm", "vllm serve {}", "H100", "bfloat16"),
    ("vllm", "vllm serve {}", "T4", "float16"),
    ("sglang", "python -m sglang.launch_server --model-path {}", "H100", "float16"),
])
def test_a_float32_checkpoint_is_sized_in_the_dtype_the_engine_runs_it_in(cli, fp32_qwen3_8b, engine, cmd, gpu, to):
    # newuser5 #18: 36 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 147,456 B/token (294,912 at 4 B); weights
    # 8,190,735,360 parameters x 2 B = 15.26 GiB (30.51 GiB at 4 B)
    code, out, _ = cli("check", f"--{engine}", cmd.format(fp32_qwen3_8b), "--gpu", gpu, "--count", "1", "--no-speed")
    assert "bytes/token per GPU                        147,456" in out, out
    flat = " ".join(out.split())  # the note wraps where the temporary folder's path ends
    assert (f"with --dtype auto {engine} runs it in {to}: weights and an 'auto' KV cache are sized at 2 bytes "
            "(give --dtype float32 to keep 4)") in flat
    if gpu == "H100":
        assert "weights                                15.26 GiB" in out


def test_an_explicit_float32_dtype_keeps_four_bytes(cli, fp32_qwen3_8b):
    code, out, _ = cli("check", "--vllm", f"vllm serve {fp32_qwen3_8b} --dtype float32", "--gpu", "H100", "--count", "1",
                       "--no-speed")
    assert "bytes/token per GPU                        294,912" in out, out
    assert "runs it in" not in out


def test_kv_sizes_a_float32_checkpoint_at_two_bytes(cli, fp32_qwen3_8b):
    code, out, err = cli("kv", "--config", f"{fp32_qwen3_8b}/config.json")
    assert code == 0, err
    assert "kv_cache_dtype auto (2 bytes/element)" in out and "KV bytes/token per GPU               147,456" in out
    assert "with --dtype auto vllm runs it in bfloat16" in " ".join(err.split())
