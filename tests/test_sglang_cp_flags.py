"""SGLang context-parallel options read from launch commands (catalog/engines/sglang.yaml, issue 14).

Release facts read from the unzipped wheels by hand: --dcp-size (alias --decode-context-parallel-size) first in
0.5.15 (srt/server_args.py:823 ``dcp_size: A[``), --attn-cp-size from 0.5.9 (server_args.py:3310), --enable-prefill-cp
from 0.5.14, spelled --enable-prefill-context-parallel in 0.5.10-0.5.19 (gone in 0.5.20).
"""
from kg.analyses.check import check_stack
from kg.inputs.launch import parse_launch

SERVE = "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 8"


def test_context_parallel_flags_become_settings(catalog):
    st = parse_launch(f"{SERVE} --dcp-size 2 --attn-cp-size 4 --enable-prefill-cp --cp-strategy zigzag", catalog,
                      engine_version="0.5.23")
    assert (st.settings["dcp_size"], st.settings["attn_cp_size"]) == (2, 4)
    assert st.settings["enable_prefill_cp"] is True and st.settings["cp_strategy"] == "zigzag"
    assert st.techniques["decode-context-parallelism"] == {"dcp_size": 2}
    st = parse_launch(f"{SERVE} --decode-context-parallel-size 4 --attention-context-parallel-size 2", catalog,
                      engine_version="0.5.23")
    assert (st.settings["dcp_size"], st.settings["attn_cp_size"]) == (4, 2)


def test_old_prefill_cp_spelling_and_release_bounds(catalog):
    st = parse_launch(f"{SERVE} --attn-cp-size 8 --enable-prefill-context-parallel", catalog, engine_version="0.5.19")
    assert st.settings["enable_prefill_cp"] is True and st.settings["attn_cp_size"] == 8
    st = parse_launch(f"{SERVE} --dcp-size 2", catalog, engine_version="0.5.14")
    assert any("--dcp-size is not an option of sglang 0.5.14" in n for n in st.notes)
    st = parse_launch(f"{SERVE} --dcp-size 2", catalog, engine_version="0.5.15")
    assert not any("--dcp-size" in n for n in st.notes) and st.settings["dcp_size"] == 2


def test_sglang_dcp_is_not_held_to_vllm_bounds(catalog, check_rules):
    # vLLM rejects DCP 4 at TP 8 for 4 KV heads (dcp <= tp / H = 2); SGLang 0.5.23 checks DCP sizes only on XPU
    st = parse_launch(f"{SERVE} --dcp-size 4", catalog, engine_version="0.5.23")
    assert "dcp-invalid-size" not in [f.rule_id for f in check_stack(st, catalog, check_rules).findings]
    st = parse_launch("vllm serve Qwen/Qwen3-235B-A22B -tp 8 -dcp 4", catalog, engine_version="0.33.0")
    assert "dcp-invalid-size" in [f.rule_id for f in check_stack(st, catalog, check_rules).findings]
