"""fit's advice on the Mooncake conversation trace and small fixtures: the host KV tier sized to the host's DRAM,
and what KV compaction the model already has."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the Qwen3-32B fit report (module fixture) is built once
pytestmark = pytest.mark.xdist_group("fit-advice")

TRACES = REPO.parent / "shared" / "data" / "traces"
MOONCAKE = str(TRACES / "mooncake_fast25_conversation_trace.jsonl")


@pytest.fixture(scope="module")
def qwen32b():
    code, out, _ = run_cli("fit", MOONCAKE, "--model", "Qwen/Qwen3-32B", "--gpu", "H100-SXM", "--format", "json")
    assert code == 0
    return json.loads(out)


def test_host_tier_fix_names_the_dram_sized_tier(qwen32b):
    fired = {r["id"]: r for r in qwen32b["rules"] if r["fired"]}
    assert "fit-host-tier-exceeds-host-memory" in fired
    # 90 % of the unbounded hits: 31,435 blocks x 512 tokens x 262,144 B/token = 3,929.38 GiB per GPU (tp 1),
    # above 256 GiB of DRAM per GPU, so the fix names 256 GiB x 1 GPU = 256.0 GiB
    assert qwen32b["features"]["host_tier_gib"] == 256.0
    fix = fired["fit-host-kv-cache"]["fix"]
    assert fix.startswith("add a host-memory KV tier of about 256.0 GiB across the parallel group (sized to 256 GiB "
                          "of host DRAM per GPU x 1 GPU(s); 90 % of the unbounded hits would need 3929.38 GiB")
    assert "3929.38 GiB (" not in fix


def test_host_tier_fix_keeps_the_90_percent_size_when_it_fits_dram():
    # small_prefix: 90 % needs 5 blocks x 64 MiB = 0.3125 GiB per GPU (tp 1) < 256 GiB -> round(0.3125, 2) = 0.31
    from kg.knowledge.catalog import load_catalog
    from kg.analyses.fitfixtures import run_fixture
    from kg.engine.rules import load_ruleset
    cat, _ = load_catalog()
    firings = run_fixture({"trace": "traces/small_prefix.jsonl", "model": "meta-llama/Llama-3.1-8B", "kv_budget_gib": 0.125},
                          cat, load_ruleset("fit"), REPO / "rules" / "fixtures")
    f = next(f for f in firings if f.rule.id == "fit-host-kv-cache")
    assert f.fired
    from kg.analyses.fit import _fmt
    assert _fmt(f.rule.fix, {"host_tier_gib": 0.31, "host_tier_basis": "90 % of the unbounded hits"}).startswith(
        "add a host-memory KV tier of about 0.31 GiB across the parallel group (90 % of the unbounded hits;")


def test_pattern_1_says_what_the_model_already_has(qwen32b):
    # Qwen3-32B: 64 query heads, 8 KV heads (GQA), no sliding window, not MLA
    f = qwen32b["features"]
    assert f["kv_features_present"] == "GQA"
    assert f["kv_features_missing"] == "MQA, MLA, sliding window"
    assert f["kv_compaction_status"] == ("Qwen/Qwen3-32B already has GQA (8 KV heads for 64 query heads); MQA, MLA, "
                                         "sliding window and cross-layer KV sharing need retraining or a different model")
    p1 = qwen32b["patterns"][0]
    assert p1["recommended"]
    assert p1["message"].endswith(f["kv_compaction_status"] + ".")
    assert {t["id"]: t["needs"] for t in p1["techniques"]} == {
        "sliding-window-attention": "retraining or a different model",
        "multi-query-attention": "retraining or a different model",
        "grouped-query-attention": "already in the model",
        "cross-layer-kv-sharing": "retraining or a different model"}


def test_compaction_status_for_sliding_and_mla_models():
    from kg.analyses.fit import _compaction_status
    from kg.inputs.modelcfg import resolve_model
    # gemma-2-9b: 16 query heads, 8 KV heads, a 4096-token window on every other layer (21 of 42)
    s = _compaction_status(resolve_model("google/gemma-2-9b-it"))
    assert s == {"kv_features_present": "GQA, sliding window", "kv_features_missing": "MQA, MLA",
                 "kv_compaction_status": "google/gemma-2-9b-it already has GQA (8 KV heads for 16 query heads) and a "
                                         "4096-token sliding window on 21 of 42 layers; MQA, MLA and cross-layer KV "
                                         "sharing need retraining or a different model"}
    # DeepSeek-V3: MLA with kv_lora_rank 512
    s = _compaction_status(resolve_model("deepseek-ai/DeepSeek-V3"))
    assert s["kv_features_present"] == "MLA"
    assert s["kv_compaction_status"].startswith("deepseek-ai/DeepSeek-V3 already has MLA (latent of kv_lora_rank 512); ")
