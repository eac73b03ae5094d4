"""The fit ruleset: fixtures both ways, thresholds as data, the cost curve, the triangle and the patterns."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from kg.knowledge.catalog import load_catalog
from kg.core.errors import OptkgError
from kg.analyses.fit import PATTERNS, cost_curve, evaluate_fit, model_context, workload_features
from kg.analyses.fitmeasure import measure_trace
from kg.analyses.fixtures import run_case
from kg.engine.fixtures import load_fixture_cases
from kg.derive.kv import GIB, kv_layout
from kg.inputs.modelcfg import load_config_file, resolve_model
from kg.engine.rules import load_rules

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl"
SMALL_CSV = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


@pytest.fixture(scope="module")
def fit_rules():
    rs, problems = load_rules("fit")
    assert not problems, [p.one_line() for p in problems]
    return rs


FIT_IDS = {r.id for r in load_rules("fit")[0].rules}
CASES = [c for c in load_fixture_cases() if c.rule in FIT_IDS]


def test_every_fit_rule_has_fire_and_pass_fixtures(fit_rules):
    have = defaultdict(set)
    for c in CASES:
        have[c.rule].add(c.expect_fire)
    assert len(fit_rules.rules) == 17
    assert {r.id: have[r.id] for r in fit_rules.rules} == {r.id: {True, False} for r in fit_rules.rules}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}:{'fire' if c.expect_fire else 'pass'}:{c.name}")
def test_fit_fixture(case, catalog, fit_rules):
    ok, detail = run_case(case, catalog, fit_rules)
    assert ok, f"{case.name}: {getattr(detail, 'reason', detail)} severity={getattr(detail, 'severity', None)} " \
               f"numbers={getattr(detail, 'numbers', None)}"


def test_thresholds_are_data_with_provenance(fit_rules):
    assert set(fit_rules.thresholds) == {"prefix_reuse_min", "prefix_reuse_high", "host_tier_min_gain",
                                         "long_session_turns", "max_num_seqs_default", "max_num_seqs_large_gpu",
                                         "large_gpu_min_gib", "host_dram_per_gpu_gib"}
    for name, t in fit_rules.thresholds.items():
        assert t["provenance"].strip() and t.get("unit") and "recalibrate" in t.get("note", ""), name


def test_rules_name_only_catalog_techniques(fit_rules, catalog):
    for r in fit_rules.rules:
        for tid in r.fixes + r.involves:
            assert tid in catalog.techniques, (r.id, tid)
        assert any(t.startswith(("checklist-", "pattern-")) for t in r.tags), r.id
    for p in PATTERNS:
        assert all(t in catalog.techniques for t in p["techniques"]), p["id"]
        assert p["rule"] in {r.id for r in fit_rules.rules}


def test_thresholds_can_be_overridden(catalog, fit_rules):
    m = measure_trace(SMALL)
    feats = workload_features(m)
    # the small trace reuses 0.61 of prompt tokens: warning band at prefix_reuse_high 0.3 ...
    _, fs = evaluate_fit(feats, None, m, catalog=catalog, ruleset=fit_rules)
    assert {f.rule.id: f.severity for f in fs if f.fired}["fit-prefix-caching"] == "warning"
    # ... and the info band when the user raises it to 0.7
    _, fs = evaluate_fit(feats, None, m, catalog=catalog, ruleset=fit_rules, thresholds={"prefix_reuse_high": 0.7})
    assert {f.rule.id: f.severity for f in fs if f.fired}["fit-prefix-caching"] == "info"
    with pytest.raises(OptkgError, match="unknown fit threshold 'nope'"):
        evaluate_fit(feats, None, m, catalog=catalog, ruleset=fit_rules, thresholds={"nope": 1})


def test_cost_curve_knees_llama_8b():
    # Llama-3.1-8B: 32 layers x 8 KV heads x 256 x 2 B = 131,072 B/token. 16 GiB / (131,072 B x 16) = 8,192
    # blocks = 131,072 tokens (the GPU KV cache size); one request gets the blocks less vLLM's null block:
    # 8,191 x 16 = 131,056 tokens (the number check derives as max_model_len_that_fits)
    lay = kv_layout(resolve_model("meta-llama/Llama-3.1-8B"))
    cc = cost_curve(lay, 16 * GIB, {"request_len_p50": 8192, "request_len_p99": 32768, "request_len_max": 40000})
    assert (cc["knee_seq_len"], cc["kv_tokens_per_gpu"]) == (131_056, 131_072)
    # p50 request = 8,192 x 131,072 B = 1 GiB -> 16 fit; p99 = 4 GiB -> 4
    assert cc["knee_batch"] == {"p50": 16, "p99": 4}
    assert cc["by_seq_len"][0] == {"seq_len": 1024, "kv_bytes_per_gpu": 1024 * 131_072}
    # the curve runs past the knee: 1,024 .. 131,072 (first power of two above 131,056)
    assert cc["by_seq_len"][-1]["seq_len"] == 131_072
    assert cc["by_batch"]["points"][4] == {"batch": 16, "kv_bytes_per_gpu": 16 * GIB}


def test_cost_curve_with_dcp_and_sliding_window():
    # Qwen3-235B-A22B at TP 8, DCP 2: 1 KV head per rank, 94 layers x 256 x 2 B = 48,128 B per token per rank,
    # and each rank holds ceil(L / 2) tokens in 16-token blocks of 770,048 B; 16 GiB = 17,179,869,184 B less the null
    # block (770,048) = 17,179,099,136 -> floor(/ 770,048) = 22,309 blocks -> ceil(L/2) <= 356,944 -> L <= 713,888.
    lay = kv_layout(resolve_model("Qwen/Qwen3-235B-A22B"), 8, 1, 2)
    assert cost_curve(lay, 16 * GIB, {})["knee_seq_len"] == 713_888
    # gpt-oss-120b: 36 layers, 18 slide with a 128-token window, 8 KV heads x (64 + 64) x 2 B = 2,048 B/token/layer.
    # whole 16-token blocks: bytes(L) = 36,864 x (16 ceil(L/16) + 128) <= 1 GiB less the null block (36 x 2,048 x 16 =
    # 1,179,648) = 1,072,562,176 -> 16 ceil(L/16) + 128 <= floor(29,095.1) = 29,095 -> ceil(L/16) <= 1,810 -> L <= 28,960
    lay = kv_layout(resolve_model("openai/gpt-oss-120b"))
    assert cost_curve(lay, GIB, {})["knee_seq_len"] == 28_960


def test_invalid_dcp_is_an_input_error():
    with pytest.raises(OptkgError, match=r"--dcp: 2 is not valid .* at tp 4 \(valid: \[1\]\)"):
        model_context(resolve_model("meta-llama/Llama-3.1-8B"), tp=4, dcp=2)


def test_capacities_in_bytes_and_tiers(catalog, fit_rules):
    # small trace, Llama-3.1-8B: a 512-token block is 512 x 131,072 B = 64 MiB; budget 0.125 GiB + 2 MiB = 65 vLLM
    # blocks of 16 tokens, one the null block vLLM never caches (v1/core/block_pool.py:191): 64 x 16 = 2 trace blocks
    m = measure_trace(SMALL)
    ctx = model_context(resolve_model("meta-llama/Llama-3.1-8B"), kv_budget_gib=0.126953125)
    rep, _ = evaluate_fit(workload_features(m), ctx, m, catalog=catalog, ruleset=fit_rules)
    caps = rep["capacities"]
    assert [(p["capacity_blocks"], p["kv_bytes_per_gpu"], p["tier"]) for p in caps["points"]] == [
        (1, 64 * 2**20, "gpu"), (2, 128 * 2**20, "gpu"), (4, 256 * 2**20, "host"), (8, 512 * 2**20, "host")]
    # 90 % of the hits needs 5 blocks = 320 MiB: host memory
    assert caps["capacity_90"] == {"blocks": 5, "kv_bytes_per_gpu": 320 * 2**20, "kv_bytes_group": 320 * 2**20, "tier": "host"}
    # the GPU holds 2 blocks: 4 of 12 blocks and 2,048 of 5,036 tokens hit
    assert caps["gpu_capacity"] == {"blocks": 2, "hit_ratio_blocks": 4 / 12, "hit_ratio_tokens": 2048 / 5036}
    # at TP 2 each GPU holds half the heads: per-GPU bytes halve, the group total stays
    ctx2 = model_context(resolve_model("meta-llama/Llama-3.1-8B"), tp=2, kv_budget_gib=0.126953125)
    rep2, _ = evaluate_fit(workload_features(m), ctx2, m, catalog=catalog, ruleset=fit_rules)
    assert rep2["capacities"]["capacity_90"]["kv_bytes_per_gpu"] == 160 * 2**20
    assert rep2["capacities"]["capacity_90"]["kv_bytes_group"] == 320 * 2**20
    assert rep2["capacities"]["gpu_capacity"]["blocks"] == 4


def _placement(rep):
    return tuple(rep["triangle"][k]["value"] for k in ("parallel_granularity", "state_locality", "state_lifetime"))


def test_triangle_placement(catalog, fit_rules):
    m = measure_trace(SMALL)
    f = workload_features(m)
    # no model, nothing stated: only the lifetime is measured (reuse 0.61 >= 0.3 -> long)
    rep, _ = evaluate_fit(f, None, m, catalog=catalog, ruleset=fit_rules)
    assert _placement(rep) == ("unknown", "unknown", "long")
    # user facts: not causal, local attention
    rep, _ = evaluate_fit(f, None, m, catalog=catalog, ruleset=fit_rules, causal=False, attention_locality="local")
    assert _placement(rep) == ("token", "local", "long")
    # a causal model with sliding layers on half its layers (gpt-oss-120b: 18 of 36) -> layer, mixed
    ctx = model_context(resolve_model("openai/gpt-oss-120b"))
    rep, _ = evaluate_fit(f, ctx, m, catalog=catalog, ruleset=fit_rules)
    assert _placement(rep) == ("layer", "mixed", "long")
    # token counts only: lifetime from the session length (2 turns -> medium; 5 -> long; none -> unknown)
    a = measure_trace(SMALL_CSV)
    fa = workload_features(a)
    for sess, want in ((None, "unknown"), (2, "medium"), (5, "long"), (1, "short")):
        rep, _ = evaluate_fit(fa, None, a, catalog=catalog, ruleset=fit_rules, session_length=sess)
        assert rep["triangle"]["state_lifetime"]["value"] == want, sess


def test_patterns_carry_catalog_costs(catalog, fit_rules):
    m = measure_trace(SMALL)
    ctx = model_context(resolve_model("meta-llama/Llama-3.1-8B"), kv_budget_gib=0.126953125)
    rep, _ = evaluate_fit(workload_features(m), ctx, m, catalog=catalog, ruleset=fit_rules, causal=False)
    pats = {p["id"]: p for p in rep["patterns"]}
    # 2-block GPU cache, reuse 0.61 (long-lived state), memory-bound (0 median requests fit in 128 MiB),
    # not causal -> all three patterns
    assert {k: p["recommended"] for k, p in pats.items()} == {"pattern-1": True, "pattern-2": True, "pattern-3": True}
    host = next(t for t in pats["pattern-2"]["techniques"] if t["id"] == "host-kv-offload")
    assert host["costs"] == [{"dimension": c["dimension"], "what": c["what"], "who": c.get("who")}
                             for c in catalog.techniques["host-kv-offload"]["costs"]]
    # the checklist files each fired rule under its item, and item 5 lists what to validate
    items = {c["item"]: c for c in rep["checklist"]}
    assert "fit-host-kv-cache" in items[2]["fired"] and "fit-memory-first" in items[4]["fired"]
    assert [v["metric"] for v in items[5]["validate"]] == ["cache hit rate", "P99 latency (TTFT, inter-token latency)",
                                                          "throughput", "host memory"]
    # hit rate to expect: 2048/5036 = 0.407 with the GPU cache, 0.610 unbounded; host memory: 5 blocks = 0.3 GiB
    assert items[5]["validate"][0]["expect"] == ("about 0.407 of prompt tokens with a GPU-only cache; up to 0.610 "
                                                 "with an unbounded cache")
    assert items[5]["validate"][3]["expect"] == "about 0.3 GiB of host KV for 90 % of the unbounded hits"


def test_mha_config_from_file_is_mha():
    m = load_config_file(REPO / "rules" / "fixtures" / "configs" / "llama2-7b-like-mha.json")
    assert (m.attention, m.num_key_value_heads, kv_layout(m).bytes_per_token_per_gpu) == ("mha", 32, 524_288)


def test_bad_user_facts(catalog, fit_rules):
    f = workload_features(measure_trace(SMALL_CSV))
    with pytest.raises(OptkgError, match="--attention-locality: expected local or global"):
        evaluate_fit(f, None, None, catalog=catalog, ruleset=fit_rules, attention_locality="sideways")
    with pytest.raises(OptkgError, match="--session-length"):
        evaluate_fit(f, None, None, catalog=catalog, ruleset=fit_rules, session_length=0)


# ---- the scheduler limit, the context limit and the host-memory sanity check --------------------

def test_scheduler_limit_follows_vllm_defaults(catalog, fit_rules):
    from kg.analyses.fit import _thresholds, scheduler_limit
    th = _thresholds(fit_rules, None)
    ctx = lambda gpu: {"gpu": gpu, **({"gpu_name": catalog.resolve_hardware(gpu)["name"],  # noqa: E731
                                       "gpu_memory_gib": catalog.resolve_hardware(gpu)["memory_gib"]})}
    # vLLM >= 0.9 get_batch_defaults: >= 70 GiB and no 'a100' in the name -> 1024, else 256
    assert scheduler_limit(th, ctx("H100-SXM"))[0] == 1024
    assert scheduler_limit(th, ctx("A100-80GB")) == (256, "vLLM >= 0.9 default max_num_seqs on A100-80GB: an A100")
    assert scheduler_limit(th, ctx("L40S"))[0] == 256  # 48 GiB < 70 GiB
    assert scheduler_limit(th, None)[0] == 256 and "pass --gpu or --max-num-seqs" in scheduler_limit(th, None)[1]
    assert scheduler_limit(th, ctx("H100-SXM"), 64) == (64, "given with --max-num-seqs")
    with pytest.raises(OptkgError, match="--max-num-seqs: expected a positive number"):
        evaluate_fit({"trace_format": "azure", "requests": 1}, None, None, ruleset=fit_rules, max_num_seqs=0)


def test_single_sequence_is_capped_by_the_context_limit():
    from kg.analyses.fit import seq_limit_text
    model = resolve_model("Qwen/Qwen3-235B-A22B")  # max_position_embeddings 40,960
    lay = kv_layout(model, 8)
    # memory knee at TP 8: 48,128 B/token/GPU x 16 = 770,048 B/block; 16 GiB = 17,179,869,184 B holds 22,310 blocks
    # (356,960 tokens, the GPU KV cache); one request: 22,310 less vLLM's null block = 22,309 x 16 = 356,944 tokens
    cc = cost_curve(lay, 16 * GIB, {}, 40960, "max_position_embeddings")
    assert (cc["knee_seq_len"], cc["seq_len_limit"], cc["seq_len_limit_by"]) == (356_944, 40_960, "max_position_embeddings")
    assert seq_limit_text(cc) == ("up to 40,960 tokens (max_position_embeddings binds; KV memory alone would hold "
                                  "356,944, the GPU KV cache's 356,960 tokens less vLLM's null block)")
    # an engine context above the knee: memory binds
    cc = cost_curve(lay, 16 * GIB, {}, 500_000, "--max-model-len")
    assert seq_limit_text(cc) == "up to 356,944 tokens (KV memory binds; the model's --max-model-len would allow 500,000)"

    # model_context reads max_position_embeddings unless --max-model-len is given
    assert model_context(model, tp=8)["context_limit"] == 40960
    assert model_context(model, tp=8, max_model_len=32768)["context_limit_by"] == "--max-model-len"
    with pytest.raises(OptkgError, match="--max-model-len: expected a positive number of tokens"):
        model_context(model, tp=8, max_model_len=0)


def test_mooncake_host_tier_larger_than_host_memory(catalog, fit_rules):
    # The tester's case with a fixed budget (independent of the weight estimate): Qwen3-235B-A22B at TP 8,
    # 16 GiB of KV per GPU, the Mooncake conversation trace (512-token blocks).
    mooncake = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces" / "mooncake_fast25_conversation_trace.jsonl"
    m = measure_trace(mooncake)
    ctx = model_context(resolve_model("Qwen/Qwen3-235B-A22B"), tp=8, kv_budget_gib=16)
    rep, fs = evaluate_fit(workload_features(m), ctx, m, catalog=catalog, ruleset=fit_rules)
    f = {x.rule.id: x for x in fs}["fit-host-tier-exceeds-host-memory"]
    assert f.fired and f.severity == "warning"
    # 90 % of the hits at 31,435 blocks x 512 tokens x 48,128 B = 774,606,684,160 B = 721.41 GiB per GPU,
    # x 8 GPUs = 5,771.27 GiB, above 256 GiB of host DRAM per GPU
    assert (f.numbers["host_gib_per_gpu_for_90"], f.numbers["host_gib_group_for_90"], f.numbers["host_dram_per_gpu_gib"]) == (
        721.41, 5771.27, 256)
    # GPU (16 GiB) + host DRAM (256 GiB) = floor(292,057,776,128 / 24,641,536) = 11,852 blocks, between the LRU
    # curve's 8,192 (0.1851) and 16,384 (0.2708) block points of the tokens hit ratio
    lru = {p["capacity_blocks"]: p["hit_ratio_tokens"] for p in m.summary["lru"]["points"]}
    assert lru[8192] < f.numbers["hit_ratio_with_host_dram"] < lru[16384]
    host = next(v for v in rep["checklist"][4]["validate"] if v["metric"] == "host memory")
    assert "721.4 GiB per GPU, above a typical 256 GiB of host DRAM per GPU" in host["expect"]
    # the longest request (126,527 tokens) is beyond Qwen3's 40,960-token context: said in the notes
    assert any(n.startswith("the trace's longest request (126,527 tokens, p99 85,858) exceeds the model's context "
                            "limit (40,960 tokens, max_position_embeddings)") for n in rep["notes"])


def test_scheduler_limit_compares_the_memory_vllm_sees(cli):
    # newuser6 #11 i: fit said "H200: 141 GiB >= 70 GiB" (the vendor's 141 GB) while every budget line uses the
    # visible 143,771 MiB = 140.40 GiB, which is what vLLM's get_batch_defaults compares (torch's total memory)
    code, out, err = cli("fit", "examples/data/mooncake_fast25_conversation_trace.jsonl", "--model", "Qwen/Qwen3-32B",
                         "--gpu", "H200")
    text = " ".join(out.split())
    assert code in (0, 1), err
    assert "scheduler limit: 1,024 sequences (vLLM >= 0.9 default max_num_seqs on H200: 140.40 GiB >= 70 GiB," in text
    assert "141 GiB" not in text


def test_scheduler_limit_below_the_large_gpu_tier_names_the_visible_memory(catalog, fit_rules):
    from kg.analyses.fit import _thresholds, scheduler_limit
    th = _thresholds(fit_rules, None)
    hw = catalog.resolve_hardware("L40S")  # 46,068 MiB visible = 44.99 GiB of the 48 GB
    ctx = {"gpu": "L40S", "gpu_name": hw["name"], "gpu_memory_gib": hw["memory_visible_mib"] / 1024}
    assert scheduler_limit(th, ctx) == (256, "vLLM >= 0.9 default max_num_seqs on L40S: 44.99 GiB < 70 GiB")
