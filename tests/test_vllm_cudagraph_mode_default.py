"""vLLM resolves cudagraph_mode itself when the command gives none, so optkg resolves it as the release does
(kg.engines.vllm.cudagraph) instead of listing it as a fact the user must give. vllm 0.34.0 config/vllm.py:
optimization level O2 by default (:465) -> FULL_AND_PIECEWISE (:325-345), O1 -> PIECEWISE (:304-324), O0 -> NONE;
--enforce-eager -> NONE (:1697-1699); a compilation mode other than VLLM_COMPILE drops the piecewise part
(:1050-1067; compilation.py:156-161: FULL_AND_PIECEWISE -> FULL_DECODE_ONLY); encoder-decoder -> FULL_DECODE_ONLY
(:1874-1886). 0.33.0 is the same code."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli

QWEN = "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 --enable-prefix-caching"


@pytest.mark.parametrize("command, version, mode", [
    ("vllm serve Qwen/Qwen3-8B", "0.34.0", "FULL_AND_PIECEWISE"),
    ("vllm serve Qwen/Qwen3-8B", "0.33.0", "FULL_AND_PIECEWISE"),
    ("vllm serve Qwen/Qwen3-8B --enforce-eager", "0.34.0", "NONE"),
    ("vllm serve Qwen/Qwen3-8B --optimization-level 1", "0.34.0", "PIECEWISE"),
    ("vllm serve Qwen/Qwen3-8B --optimization-level 0", "0.34.0", "NONE"),
    ("""vllm serve Qwen/Qwen3-8B -cc '{"mode": 0}'""", "0.34.0", "FULL_DECODE_ONLY"),
    ("vllm serve openai/whisper-large-v3", "0.34.0", "FULL_DECODE_ONLY"),
    # given: the user's value stands (no resolution); a release optkg has not read: not resolved
    ("""vllm serve Qwen/Qwen3-8B -cc '{"cudagraph_mode": "PIECEWISE"}'""", "0.34.0", None),
    ("vllm serve Qwen/Qwen3-8B", "0.32.0", None),
])
def test_cudagraph_mode_is_the_one_the_release_configures(catalog, command, version, mode):
    from kg.engines.launch import parse_command
    from kg.engines.vllm.cudagraph import resolved_cudagraph_mode
    st = parse_command(command, catalog, "vllm")
    st.engine_version = version
    assert resolved_cudagraph_mode(st, st.values()) == mode


def _check(cmd: str) -> dict:
    code, out, err = run_cli("check", "--cmd", cmd, "--gpu", "H200", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_plain_vllm_stack_leaves_only_facts_a_user_can_give_unevaluated():
    rep = _check(QWEN)
    assert [x["missing"] for x in rep["not_evaluable"]] == [["prefix_reuse_ratio"]]
    fired = [f["rule_id"] for f in rep["findings"]]
    assert not [r for r in fired if r.startswith("coupling-cuda-graphs")]


def test_full_graphs_asked_for_still_need_a_backend_that_captures_them():
    # a full-graph mode the user gives is asked of the backend (vLLM raises for FULL on a backend that never
    # supports it, compilation.py:1553-1568): the coupling fires when the stack does not use FlashAttention
    rep = _check(QWEN + """ -cc '{"cudagraph_mode": "FULL"}'""")
    assert "coupling-cuda-graphs-requires-flash-attention" in [f["rule_id"] for f in rep["findings"]]
