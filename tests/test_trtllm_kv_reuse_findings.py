"""TensorRT-LLM FP8 KV cache + block reuse is one issue (TRT-LLM #2699), reported once (newuser6 #4: the catalog
coupling and the hand rule both fired, "3 finding(s)" for 2 facts); the ignored list keeps its items apart."""
from __future__ import annotations

import json

from conftest import run_cli

EXTRA = """kv_cache_config:
  free_gpu_memory_fraction: 0.85
  enable_block_reuse: true
  dtype: {dtype}
cuda_graph_config:
  enable_padding: true
print_iter_log: true
"""


def _check(tmp_path, dtype: str, fmt: str = "json"):
    extra = tmp_path / "extra.yml"
    extra.write_text(EXTRA.format(dtype=dtype))
    code, out, err = run_cli("check", "--cmd", "trtllm-serve meta-llama/Meta-Llama-3.1-70B --backend pytorch --tp_size 4 "
                             f"--max_seq_len 16384 --extra_llm_api_options {extra}", "--gpu", "H100-SXM", "--count", "4",
                             "--no-speed", "--format", fmt)
    assert code in (0, 1), err
    return out


def test_trtllm_fp8_kv_with_block_reuse_is_one_finding(tmp_path):
    rep = json.loads(_check(tmp_path, "fp8"))
    ids = [f["rule_id"] for f in rep["findings"]]
    assert ids == ["coupling-kv-cache-quantization-causes-model-accuracy", "fp8-kv-cache-reuse-accuracy"]
    # no finding about reuse without an FP8 cache
    rep = json.loads(_check(tmp_path, "auto"))
    assert [f["rule_id"] for f in rep["findings"]] == []


def test_ignored_options_are_listed_apart(tmp_path):
    text = " ".join(_check(tmp_path, "auto", "text").split())
    assert ("ignored (not modelled): --backend pytorch; cuda_graph_config.enable_padding: True "
            f"({tmp_path / 'extra.yml'}:6); print_iter_log: True ({tmp_path / 'extra.yml'}:7)") in text
