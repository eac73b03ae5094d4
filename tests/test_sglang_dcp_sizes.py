"""SGLang's own DCP sizes (kg.derive.kv.valid_dcp_sizes_sglang): the numbers of an MLA/GQA finding agree with the
fix text's --dcp-size, at SGLang 0.5.23 (distributed/parallel_state.py:2719-2725, configs/model_config.py:1700-1711)
and before --dcp-size existed (0.5.14)."""
from __future__ import annotations

import pytest

import kg


@pytest.fixture(scope="module")
def catalog():
    return kg.load_catalog()


def _finding(catalog, cmd, rule):
    rep = kg.check(kg.stack_from_command(cmd, catalog), catalog)
    return next(f for f in rep.findings if f.rule_id == rule), rep


def test_deepseek_v3_tp8_dcp2_on_sglang_0_5_23(catalog):
    # the tester's stack: MLA caches one latent per DCP group; every divisor of tp 8 is a DCP size
    f, rep = _finding(catalog, "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dcp-size 2",
                      "mla-kv-duplication")
    assert (f.numbers["max_dcp_size"], f.numbers["suggested_dcp_sizes"], f.numbers["replication_factor"]) == (8, [1, 2, 4, 8], 4)
    assert "--dcp-size" in f.fix
    assert rep.derived["valid_dcp_sizes"] == [1, 2, 4, 8]


def test_before_sglang_had_dcp_the_sizes_stay_1(catalog):
    cmd = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8"
    stack = kg.stack_from_command(cmd, catalog)
    stack.engine_version = "0.5.14"
    rep = kg.check(stack, catalog)
    f = next(f for f in rep.findings if f.rule_id == "mla-kv-duplication")
    assert (f.numbers["max_dcp_size"], f.numbers["suggested_dcp_sizes"]) == (1, [1])
    assert "SGLang >= 0.5.15" in f.fix


def test_gqa_dcp_sizes_keep_each_rank_holding_its_heads(catalog):
    # Qwen3-235B-A22B: 4 KV heads, tp 8 -> tp // dcp >= 4 KV-head groups only for dcp 1, 2
    rep = kg.check(kg.stack_from_command("python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8", catalog), catalog)
    assert rep.derived["valid_dcp_sizes"] == [1, 2] and rep.derived["max_useful_dcp_size"] == 2
