"""`optkg kv --help` states the block size kv uses when --block-size is not given: the release's (newuser6 #11 c:
it said "default 16" while kv at the default release, vLLM 0.34.0, sizes 64-token blocks)."""
from __future__ import annotations

from conftest import run_cli
from kg.inputs.effective import default_block_size


def test_help_names_the_release_default_that_kv_uses():
    code, out, _ = run_cli("kv", "--help")
    text = " ".join(out.split())
    assert code == 0 and "(default: the release's, 16 before vLLM 0.34.0 and 64 from it," in text
    assert "default 16" not in text
    # catalog/engines/releases/vllm.yaml: 16 for >=0.4.0,<0.34.0 (cache.py:185 at 0.33.0), 64 from 0.34.0
    assert (default_block_size("vllm", "0.33.0"), default_block_size("vllm", "0.34.0")) == (16, 64)


def test_kv_prints_the_block_of_the_release_it_sizes_for():
    _, out, _ = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100")
    assert "GPU blocks (vLLM, 64-token blocks)" in out
    _, out, _ = run_cli("kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100", "--engine-version", "0.33.0")
    assert "GPU blocks (vLLM, 16-token blocks)" in out
