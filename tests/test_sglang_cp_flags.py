"""SGLang context-parallel options read from launch commands (catalog/engines/sglang.yaml, issue 14).

Release facts read from the unzipped wheels by hand: --dcp-size (alias --decode-context-parallel-size) first in
0.5.15 (srt/server_args.py:823 ``dcp_size: A[``), --attn-cp-size from 0.5.9 (server_args.py:3310), --enable-prefill-cp
from 0.5.14, spelled --enable-prefill-context-parallel in 0.5.10-0.5.19 (gone in 0.5.20).
"""
from kg.analyses.check import check_stack
from kg.engines.launch import parse_launch

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
    # an option the release does not accept is refused (an ERROR in check), naming the releases that have it
    assert [(r["flag"], r["exists_in"]) for r in st.refused] == [("--dcp-size", ">=0.5.15")]
    st = parse_launch(f"{SERVE} --dcp-size 2", catalog, engine_version="0.5.15")
    assert st.refused == [] and st.settings["dcp_size"] == 2


def test_sglang_dcp_is_not_held_to_vllm_bounds(catalog, check_rules):
    # vLLM rejects DCP 4 at TP 8 for 4 KV heads (dcp <= tp / H = 2); SGLang 0.5.23 checks DCP sizes only on XPU
    st = parse_launch(f"{SERVE} --dcp-size 4", catalog, engine_version="0.5.23")
    assert "dcp-invalid-size" not in [f.rule_id for f in check_stack(st, catalog, check_rules).findings]
    st = parse_launch("vllm serve Qwen/Qwen3-235B-A22B -tp 8 -dcp 4", catalog, engine_version="0.33.0")
    assert "dcp-invalid-size" in [f.rule_id for f in check_stack(st, catalog, check_rules).findings]


def test_flag_defaults_are_sglang_values_when_not_given(catalog):
    from kg.inputs.launch.argv import flag_defaults
    d = flag_defaults("sglang")
    # 0.5.23 arg_groups/fields: enable_lmcache ... = False (memory.py:258), attn_cp_size = 1 (parallel.py:111),
    # load_format = "auto" (model.py:97), offload_group_size = -1 (exec_.py:1075); SGLANG_DISAGG_STAGING_BUFFER unset
    assert (d["enable_lmcache"], d["attn_cp_size"], d["load_format"], d["offload_group_size"]) == (False, 1, "auto", -1)
    assert d["sglang_disagg_staging_buffer"] is False and "hicache_mem_layout" not in d  # layer_first <= 0.5.9, page_first later
    assert flag_defaults("no-such-engine") == {}


def _fired(catalog, check_rules, cmd, release):
    st = parse_launch(cmd, catalog, engine_version=release)
    return {f.rule_id for f in check_stack(st, catalog, check_rules).findings}


def test_sglang_check_rules_from_a_launch_command(catalog, check_rules):
    cmd = f"{SERVE} --enable-lmcache --enable-hierarchical-cache"
    assert "sglang-lmcache-with-hierarchical-cache" in _fired(catalog, check_rules, cmd, "0.5.23")
    assert "sglang-lmcache-with-hierarchical-cache" not in _fired(catalog, check_rules, cmd, "0.5.20")  # message from 0.5.21
    env = f"SGLANG_DISAGG_STAGING_BUFFER=1 {SERVE} --disaggregation-mode prefill --enable-kv-cache-sharding"
    got = _fired(catalog, check_rules, env, "0.5.23")
    assert "sglang-kv-cache-sharding-with-staging-buffer" in got and "sglang-kv-cache-sharding-off-prefill-server" not in got
    plain = _fired(catalog, check_rules, SERVE, "0.5.23")
    assert not {r for r in plain if r.startswith(("sglang-lmcache", "sglang-kv-cache-sharding", "sglang-prefill-only"))}
