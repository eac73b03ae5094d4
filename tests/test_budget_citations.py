"""The KV budget's "requested" line cites where the worker computes total x gpu_memory_utilization at the stack's
release (newuser6 #7: "vllm v1/worker/utils.py:716-726" was printed for every release; at 0.34.0 those lines are the
multimodal-embedding assertion, the formula is :743)."""
from __future__ import annotations

from kg.engines.vllm.budget import requested_source


def test_requested_line_cites_the_release_it_holds_for():
    assert requested_source("0.34.0") == requested_source(None) == "vllm 0.34.0 v1/worker/utils.py:743"
    assert requested_source("0.33.0") == "vllm 0.33.0 v1/worker/utils.py:724"
    assert requested_source("0.14.0") == "vllm 0.14.0 v1/worker/utils.py:258"
    assert requested_source("0.8.5") == "vllm 0.8.5 v1/worker/gpu_worker.py:209"
    # a release not read takes the read one before it, which the citation names
    assert requested_source("0.12.0") == "vllm 0.11.0 v1/worker/gpu_worker.py:183"
    # V0 (the default before 0.8.0)
    assert requested_source("0.7.3") == "vllm 0.7.3 worker/worker.py:233"
    assert requested_source("0.6.3") == ("vllm worker/worker.py determine_num_available_blocks (vllm 0.6.3 not read; "
                                         "0.7.1 worker/worker.py:232)")


def test_every_requested_citation_is_its_evidence_line():
    from kg.derive.budget import engine_table
    facts = engine_table("vllm")["ranged_facts"]
    for name in ("budget_requested_source", "budget_requested_source_v0"):
        for e in facts[name]:
            ev = e["evidence"][0]
            assert e["since"] == ev["release"]
            assert e["value"] == f"vllm {ev['release']} {ev['path'].removeprefix('vllm/')}:{ev['line']}"
