"""Chunked local attention (Llama-4 ``attention_chunk_size``) as vLLM sizes it, per release (issue 13, tester
finding 4). Every number is worked by hand from the released source cited in kg/derive/kv_specs.py.

Llama-4 Scout (catalog/models/meta-llama__Llama-4-Scout-17B-16E-Instruct.json): 48 layers, every 4th NoPE full
attention (no_rope_layers default, models/llama4.py:251-264) -> 12 full + 36 chunked (chunk 8,192); 8 KV heads x
head_dim 128, bfloat16. At TP 8 one KV head per rank: page = 16 x 1 x (128 + 128) x 2 B = 8,192 B per layer.
Budget 40 GiB = 42,949,672,960 B; max_model_len 1,000,000; vllm serve on H100: max_num_batched_tokens 8,192.

vLLM 0.33.0, hybrid manager on (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 from 0.14.0):
- buckets 36 chunked / 12 full, group size 12 (36 >= 1.5 x 12, kv_cache_planning.py:416-556): 3 chunked groups + 1
  full group of 12 layers; bytes per block 12 x 8,192 = 98,304; num_blocks 42,949,672,960 // 98,304 = 436,906
- blocks per request: full cdiv(1,000,000, 16) = 62,500; chunked cdiv(min(8,192 + 2 x 8,192, 1,000,000), 16) = 1,536
  per group (kv_cache_interface.py:861-888, two batches in flight from 0.26.0) -> 62,500 + 3 x 1,536 = 67,108
- max concurrency 436,906 / 67,108 = 6.5105 (logged 6.51x); GPU KV cache size int(6.5105 x 1,000,000) = 6,510,490
- longest request: (40 GiB - the null block) // 98,304 = 436,905 blocks; cdiv(L, 16) + 4,608 <= 436,905 -> 6,916,752
vLLM 0.14.0 (manager on, one batch in flight, the pre-0.21 "GPU KV cache size"):
- chunked cdiv(min(8,192 + 8,192, 1,000,000), 16) = 1,024 -> 62,500 + 3 x 1,024 = 65,572; 436,906 / 65,572 = 6.66
- GPU KV cache size = num_blocks // groups x block = 436,906 // 4 x 16 = 1,747,616 (kv_cache_utils.py:1287-1305)
- longest request (no null block before 0.29.0): 436,906 - 3,072 = 433,834 blocks x 16 = 6,941,344
vLLM 0.13.0 (manager off by default): full x48, 48 x 8,192 = 393,216 B per block -> 109,226 blocks; 62,500 per request
  -> 1.75x; GPU KV cache size 109,226 // 1 x 16 = 1,747,616.
"""
from __future__ import annotations

import json

from conftest import run_cli as _run_cli

from report_text import unwrap


def run_cli(*argv):
    """The in-process CLI with the text's 100-column wrapping undone, for substring assertions."""
    code, out, err = _run_cli(*argv)
    return code, unwrap(out), err

from kg.engines.vllm.kv_plan import eagle_method, hybrid_manager, plan_kv_cache
from kg.inputs.modelcfg import resolve_model

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
GIB = 2**30
SERVE = f"vllm serve {SCOUT} -tp 8 --max-model-len 1000000"


def _plan(**kw):
    return plan_kv_cache(resolve_model(SCOUT), 8, max_model_len=1_000_000, **kw)


def test_scout_tp8_40gib_1m_tokens_at_0_33_0_worked_from_the_source():
    p = _plan()
    assert p.hybrid_allocator and p.hybrid_reason.startswith("on: the release default")
    assert [(s.kind, s.layers, s.groups, s.blocks_per_request) for s in p.specs] == [
        ("chunked", 36, 3, 1536), ("full", 12, 1, 62500)]
    assert (p.group_size, p.bytes_per_block, p.blocks_per_request) == (12, 98_304, 67_108)
    assert p.groups_text() == "chunked x36 + full x12 (4 groups of 12 layers)"
    c = p.capacity(40 * GIB)
    assert c["num_blocks"] == 436_906 and c["max_concurrency"] == 6.51 and c["kv_cache_size_tokens"] == 6_510_490
    assert p.longest_request(40 * GIB - p.bytes_per_block) == 6_916_752


def test_release_boundary_0_13_0_off_and_0_14_0_on():
    off = _plan(engine_version="0.13.0")
    assert not off.hybrid_allocator and [(s.kind, s.layers) for s in off.specs] == [("full", 48)]
    assert "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0" in off.hybrid_reason
    assert "envs.py:1432-1434" in off.hybrid_reason
    c = off.capacity(40 * GIB)
    assert (off.bytes_per_block, off.blocks_per_request) == (393_216, 62_500)
    assert (c["num_blocks"], c["max_concurrency"], c["kv_cache_size_tokens"]) == (109_226, 1.75, 1_747_616)
    on = _plan(engine_version="0.14.0")
    assert on.hybrid_allocator and on.max_in_flight_tokens == 8192  # one batch before 0.26.0
    assert [(s.kind, s.groups, s.blocks_per_request) for s in on.specs] == [("chunked", 3, 1024), ("full", 1, 62500)]
    c = on.capacity(40 * GIB)
    assert (c["num_blocks"], on.blocks_per_request, c["max_concurrency"]) == (436_906, 65_572, 6.66)
    assert c["kv_cache_size_tokens"] == 1_747_616  # 436,906 // 4 x 16: the log of 0.14.0-0.20.x
    assert on.longest_request(40 * GIB) == 6_941_344
    # 0.25.0: still one batch in flight; 0.26.0: two (VllmConfig.max_in_flight_tokens)
    assert _plan(engine_version="0.25.0").max_in_flight_tokens == 8192
    assert _plan(engine_version="0.26.0").max_in_flight_tokens == 16384
    # before 0.10.1 vLLM does not read the variable and keeps the manager on (0.10.0 config.py:4670-4677)
    assert _plan(engine_version="0.10.0").hybrid_allocator


def test_env_eagle_and_flag_turn_the_manager_off():
    m = resolve_model(SCOUT)
    assert not hybrid_manager(m, None, chunked_env=False).on
    assert hybrid_manager(m, "0.13.0", chunked_env=True).on  # =1 enables it on the releases that default to 0
    d = hybrid_manager(m, None, speculative_method="eagle3")
    assert not d.on and "EAGLE-family" in d.reason
    assert hybrid_manager(m, None, speculative_method="ngram").on
    assert not hybrid_manager(m, None, disable_flag=True).on
    # explicitly enabled where vLLM turns it off: refused from 0.13.0, silently off before
    r = hybrid_manager(m, "0.13.0", disable_flag=False)
    assert not r.on and r.refused and "ValueError" in r.refused
    assert hybrid_manager(m, "0.12.0", disable_flag=False).refused is None
    # models without chunked attention: vLLM's default, whatever the variable says
    q = resolve_model("Qwen/Qwen3-32B")
    assert hybrid_manager(q, "0.13.0", chunked_env=False).on


def test_eagle_family_per_release():
    assert eagle_method("dflash", "0.19.0") is False and eagle_method("dflash", "0.20.0") is True
    assert eagle_method("dspark", "0.24.0") is False and eagle_method("dspark", "0.25.0") is True
    assert eagle_method("deepseek_mtp", "0.10.0") and eagle_method("qwen3_next_mtp", "0.10.2")
    assert not eagle_method("qwen3_next_mtp", "0.10.0")
    assert eagle_method("deepseek_mtp", "0.33.0")  # folded into mtp from 0.11.0
    assert not eagle_method("draft_model", None) and not eagle_method(None, None)


def _check(cmd: str, *extra: str) -> dict:
    # the numbers below are worked for vLLM 0.33.0's 16-token blocks (64 from 0.34.0) unless a test names a release
    pin = () if "--engine-version" in extra else ("--engine-version", "0.33.0")
    code, out, err = run_cli("check", "--vllm", cmd, "--kv-budget-gib", "40", *pin, *extra, "--format", "json",
                             "--no-speed")  # derived only: the Speed section (~1 CPU-s a point) is not read
    assert code in (0, 1), err
    return json.loads(out)["derived"]


def test_check_reads_the_release_the_env_the_flag_and_eagle_from_the_command():
    d = _check(SERVE)
    assert (d["kv_layer_groups"], d["kv_blocks_per_request"], d["max_concurrency"], d["kv_tokens_total"]) == (
        "chunked x36 + full x12 (4 groups of 12 layers)", 67_108, 6.51, 6_510_490)
    assert d["max_model_len_that_fits"] == 6_916_752
    d = _check(f"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 {SERVE}")
    assert (d["kv_layer_groups"], d["max_concurrency"], d["kv_tokens_total"]) == ("full x48", 1.75, 1_747_616)
    assert d["kv_hybrid_manager"].startswith("off: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 in the command")
    d = _check(f"{SERVE} --disable-hybrid-kv-cache-manager")
    assert d["kv_layer_groups"] == "full x48" and d["kv_hybrid_manager"].startswith("off: --disable-hybrid")
    d = _check(SERVE, "--engine-version", "0.13.0")
    assert (d["kv_layer_groups"], d["max_concurrency"]) == ("full x48", 1.75)
    d = _check(SERVE, "--engine-version", "0.14.0")
    assert (d["kv_blocks_per_request"], d["max_concurrency"], d["kv_tokens_total"]) == (65_572, 6.66, 1_747_616)


def test_check_eagle3_head_turns_the_manager_off(tmp_path):
    # an EAGLE3 head of one decoder layer (Llama-4 shape): its layer joins the full group; the manager is off, so
    # the 36 chunked layers are full too: 49 layers x 8,192 B = 401,408 B per block; 42,949,672,960 // 401,408
    # = 106,997 blocks; 62,500 per request -> 1.71x
    head = tmp_path / "eagle3"
    head.mkdir()
    (head / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
        "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 16384, "vocab_size": 202048, "max_position_embeddings": 1048576,
        "torch_dtype": "bfloat16"}))
    spec = json.dumps({"method": "eagle3", "model": str(head), "num_speculative_tokens": 3})
    d = _check(f"{SERVE} --speculative-config '{spec}'")
    assert d["kv_hybrid_manager"].startswith("off: chunked local attention with the eagle3 speculative config")
    assert d["kv_layer_groups"] == "full x49" and d["kv_num_blocks"] == 106_997
    assert d["max_concurrency"] == 1.71


def test_kv_command_prints_the_groups_and_why():
    code, out, err = run_cli("kv", "--model", SCOUT, "--tp", "8", "--kv-budget-gib", "40", "--max-model-len", "1000000",
                             "--engine-version", "0.33.0")
    assert code == 0, err
    assert "  KV layer groups (vLLM)               chunked x36 + full x12 (4 groups of 12 layers)" in out
    assert "hybrid KV-cache manager (vLLM)       on: the release default VLLM_ALLOW_CHUNKED_LOCAL_ATTN" in out
    assert "blocks per request at 1,000,000      67,108  (3 x 1,536 chunked + 62,500 full; 16,384 tokens" in out
    assert "  GPU KV cache size (vLLM)             6,510,490 tokens" in out
    assert "  KV tokens, scheduler-wide (x dcp 1)  6,510,490" in out
    assert "max concurrency at 1,000,000 tokens   6.51x" in out
    code, out, err = run_cli("kv", "--model", SCOUT, "--tp", "8", "--kv-budget-gib", "40", "--max-model-len", "1000000",
                             "--engine-version", "0.13.0")
    assert code == 0, err
    assert "KV layer groups (vLLM)               full x48" in out and "1.75x" in out
    code, out, err = run_cli("kv", "--model", SCOUT, "--tp", "8", "--kv-budget-gib", "40", "--max-model-len", "1000000",
                             "--disable-hybrid-kv-cache-manager")
    assert code == 0 and "off: --disable-hybrid-kv-cache-manager" in out and "1.75x" in out
    code, out, err = run_cli("kv", "--model", SCOUT, "--engine-version", "next")
    assert code == 2 and "--engine-version" in err


def test_check_and_sweep_show_the_same_numbers():
    d = _check(SERVE, "--gpu", "H100-SXM", "--count", "8")
    code, out, err = run_cli("sweep", "--vllm", SERVE, "--tp", "8", "--gpu", "H100-SXM", "--count", "8",
                             "--kv-budget-gib", "40", "--engine-version", "0.33.0", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    s = json.loads(out)["combinations"][0]
    assert (s["kv_tokens_total"], s["max_concurrency"]) == (d["kv_tokens_total"], d["max_concurrency"]) == (6_510_490, 6.51)


def test_fit_knee_and_locality_follow_the_chunked_groups():
    # fit sizes for the latest vLLM (0.34.0: 64-token blocks): its knee is check's longest request (the groups'
    # blocks, less the null block). A block of the 4 groups: 12 layers x 1 KV head x 128 x 2 x 2 B x 64 = 393,216 B;
    # 42,949,672,960 // 393,216 = 109,226 blocks, less the null block 109,225; the 3 chunked groups hold
    # (8,192 + 16,384 in flight) / 64 = 384 each: (109,225 - 1,152) x 64 = 6,916,672 tokens
    from kg.analyses.fit import cost_curve, model_context
    ctx = model_context(resolve_model(SCOUT), tp=8, kv_budget_gib=40)
    assert ctx["plan"] is not None and ctx["plan"].groups_text() == "chunked x36 + full x12 (4 groups of 12 layers)"
    assert ctx["block_size"] == 64
    cc = cost_curve(ctx["layout"], ctx["budget_bytes"], {}, plan=ctx["plan"], block_size=ctx["block_size"])
    code, out, err = run_cli("check", "--vllm", SERVE, "--kv-budget-gib", "40", "--format", "json")
    assert code in (0, 1), err
    assert cc["knee_seq_len"] == 6_916_672 == json.loads(out)["derived"]["max_model_len_that_fits"]
    # 1,048,576 tokens: (16,384 + 3 x 384) blocks x 393,216 B = 6,895,435,776 B
    assert {p["seq_len"]: p["kv_bytes_per_gpu"] for p in cc["by_seq_len"]}[1 << 20] == 6_895_435_776
    code, out, err = run_cli("fit", "rules/fixtures/traces/small_prefix.jsonl", "--model", SCOUT, "--tp", "8",
                             "--kv-budget-gib", "40")
    assert code in (0, 1), err
    assert "knee: one sequence up to 6,916,672 tokens" in out
    assert "state locality: mixed (36 of 48 layers attend within 8192-token chunks" in out


def test_sglang_holds_chunked_layers_in_its_swa_pool():
    # SGLang 0.5.23 gives Llama-4 the hybrid SWA pool (is_hybrid_swa_model, model_config.py:2651-2690) with the 36
    # chunked layers as a sliding window of attention_chunk_size (load_model_utils.py:152-156): per layer 1 KV head x
    # 256 x 2 B = 512 B/token; cell 12 x 512 + 0.8 x 36 x 512 = 20,889.6 B; 42,949,672,960 // 20,889.6 = 2,056,031
    # full-pool tokens; SWA int(2,056,031 x 0.8) = 1,644,824
    code, out, err = run_cli("kv", "--model", SCOUT, "--tp", "8", "--kv-budget-gib", "40", "--engine", "sglang")
    assert code == 0, err
    assert "SGLang token pool (hybrid-swa)       2,056,031 tokens" in out
    assert "SGLang SWA pool                      1,644,824 tokens" in out
    assert ("SGLang pools serve                   full x12 + swa x36 (chunked local attention held as a 8,192-token "
            "sliding window: sglang 0.5.23 load_model_utils.py:152-156") in out
    code, out, err = run_cli("check", "--sglang", f"python -m sglang.launch_server --model-path {SCOUT} --tp 8 "
                             "--context-length 1000000", "--kv-budget-gib", "40", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)["derived"]
    assert (d["kv_sglang_full_pool_tokens"], d["kv_sglang_swa_pool_tokens"], d["max_concurrency"]) == (
        2_056_031, 1_644_824, 2.06)  # the full pool bounds a 1,000,000-token request: 2,056,031 / 1e6
    assert d["kv_sglang_pool_layers"].startswith("full x12 + swa x36 (chunked local attention")


def test_group_size_rule_per_release():
    # gpt-oss-120b (18 sliding + 18 full layers) with one EAGLE layer: 18 sliding + 19 full. 19 < 1.25 x 18 and
    # < 1.5 x 18: one group of 19 each from 0.12.0; before 0.12.0 the group size is always the smallest count (18),
    # so the 19 full layers take cdiv(19, 18) = 2 groups (0.11.1 kv_cache_utils.py:974)
    from kg.engines.vllm.kv_plan import group_size_max_ratio
    assert (group_size_max_ratio("0.11.1"), group_size_max_ratio("0.12.0"), group_size_max_ratio("0.17.0"),
            group_size_max_ratio("0.18.0"), group_size_max_ratio(None)) == (None, 1.25, 1.25, 1.5, 1.5)
    m = resolve_model("openai/gpt-oss-120b")
    new = plan_kv_cache(m, max_model_len=131072, extra_full_layers=1)
    old = plan_kv_cache(m, max_model_len=131072, extra_full_layers=1, engine_version="0.11.1")
    assert (new.group_size, [s.groups for s in new.specs]) == (19, [1, 1])
    assert (old.group_size, [s.groups for s in old.specs]) == (18, [1, 2])
    # 0.11.1: one batch in flight: sliding cdiv(128 - 1 + 8,192, 16) + 1 = 521; full cdiv(131,072, 16) = 8,192 x 2
    assert old.blocks_per_request == 521 + 2 * 8192


def test_python_api_takes_the_release_and_the_flag():
    import kg
    assert kg.kv(SCOUT, 8, kv_budget_gib=40, max_model_len=1_000_000)["capacity"]["max_concurrency"] == 6.51
    assert kg.kv(SCOUT, 8, kv_budget_gib=40, max_model_len=1_000_000, engine_version="0.13.0")["capacity"][
        "max_concurrency"] == 1.75
    out = kg.kv(SCOUT, 8, kv_budget_gib=40, max_model_len=1_000_000, disable_hybrid_kv_cache_manager=True)
    assert out["vllm_plan"]["hybrid_reason"].startswith("off: --disable-hybrid") and out["capacity"]["max_concurrency"] == 1.75


def test_kv_gpu_budget_follows_the_engine_version():
    # kv --gpu estimates the budget check estimates for the same release (0.11.0: utilization 0.9, no CUDA-graph line)
    code, out, err = run_cli("kv", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--engine-version", "0.11.0",
                             "--max-model-len", "32768", "--format", "json")
    assert code == 0, err
    kv_budget = json.loads(out)["kv_budget"]["kv_bytes"]
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 32768",
                             "--engine-version", "0.11.0", "--gpu", "H100-SXM", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    assert round(kv_budget) == json.loads(out)["derived"]["kv_budget_bytes_per_gpu"]


def test_kv_connector_turns_the_manager_off_as_the_release_does():
    # gpt-oss-120b (18 sliding + 18 full, 8 KV heads x (64 + 64) x 2 B x 16 = 32,768 B per layer per block) at 131,072:
    # LMCacheConnectorV1 does not subclass SupportsHMA (0.33.0) -> manager off -> full x36: 36 x 32,768 = 1,179,648 B
    # per block; 42,949,672,960 // 1,179,648 = 36,408 blocks; 8,192 per request -> 4.44x
    from kg.engines.vllm.kv_plan import connector_supports_hma
    serve = "vllm serve openai/gpt-oss-120b --max-model-len 131072 --kv-transfer-config "
    d = _check(serve + """'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'""")
    assert (d["kv_layer_groups"], d["kv_num_blocks"], d["max_concurrency"]) == ("full x36", 36_408, 4.44)
    assert d["kv_hybrid_manager"].startswith("off: the LMCacheConnectorV1 KV connector does not subclass SupportsHMA")
    d = _check(serve + """'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'""")
    assert d["kv_layer_groups"] == "sliding x18 + full x18 (2 groups of 18 layers)" and "kv_hybrid_manager" not in d
    # before 0.22.0 any connector turns it off, unless asked for from 0.13.0
    m = resolve_model("openai/gpt-oss-120b")
    assert not hybrid_manager(m, "0.21.0", kv_connector="NixlConnector").on
    assert hybrid_manager(m, "0.21.0", kv_connector="NixlConnector", disable_flag=False).on
    assert not hybrid_manager(m, "0.12.0", kv_connector="NixlConnector", disable_flag=False).on
    assert hybrid_manager(m, None, kv_connector=None).on and hybrid_manager(m, None, kv_connector="").on
    assert connector_supports_hma("NixlPullConnector", "0.24.0") and not connector_supports_hma("NixlPullConnector", "0.23.0")
    assert connector_supports_hma("MoRIIOConnector", "0.30.0") and not connector_supports_hma("MoRIIOConnector", "0.29.0")


def test_mamba_hybrid_without_the_manager_is_a_refusal():
    from kg.inputs.modelcfg import load_config_file
    from conftest import REPO
    m = load_config_file(REPO / "tests/fixtures/field_cases/configs/qwen3-next-80b-a3b-instruct-fp8.json")
    p = plan_kv_cache(m, 4, max_model_len=32768, hybrid_allocator=False)
    assert p.refused and "Failed to promote local KV cache specs to one unified type" in p.refused
    assert plan_kv_cache(m, 4, max_model_len=32768).refused is None
    # a connector without SupportsHMA does the same to a Mamba hybrid (vLLM's warning: "hybrid SSM models ... will fail")
    assert plan_kv_cache(m, 4, max_model_len=32768, kv_connector="LMCacheConnectorV1").refused
