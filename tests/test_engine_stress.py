"""Stress the rule engine in one process: every shipped check rule over every check fixture and 3,000
generated stacks, then the ruleset partitioning at 10x the shipped rule count (synthetic rules).

durable-rules keeps global state and crashes or drifts under some loads
(shared/reference/durable_rules_notes.md); kg.engine.durable isolates it. Here we assert, in one process:
- no crash and no exception on any input;
- the findings of the long-lived engine equal those of an independent pure-Python matcher on every
  generated stack, and equal those of a brand-new ruleset evaluating the stack alone (a "single run")
  on a sample - so earlier inputs never leak into later answers;
- flat memory: the peak RSS grows by less than a bound while the second half of the stacks runs;
- partitioning: 10x the shipped check rules, compiled into rulesets of at most CHUNK rules, match
  exactly what the pure-Python matcher says, with no durable limit error (>64 rules on one shared
  condition, >512 conditions under one node).
"""
from __future__ import annotations

import math
import random
import resource
from pathlib import Path

import pytest

from kg.knowledge.catalog import load_catalog
from kg.analyses.check import _functions, fixture_stack, stack_facts
from kg.engine import durable
from kg.engine.durable import CHUNK, CompiledRules
from kg.engine.fixtures import load_fixture_cases
from kg.inputs.modelcfg import bundled_model_ids, resolve_model
from kg.engine.rules import RuleSet, evaluate_rules, load_rules
from kg.inputs.stack import Stack, add_technique, set_setting

N_STACKS = 1500  # generated stacks (was 3,000: halved to keep make test under five minutes on two cores)
SINGLE_RUN_SAMPLE = 40
RSS_GROWTH_LIMIT_MB = 10  # peak RSS growth allowed over the second half of the generated stacks


class PyMatcher:
    """Independent structural matcher: a rule matches when each pattern is met by some fact.

    Same contract as CompiledRules.match: [(rule_id, facts of the first combination)] in rule order;
    values compare with their types (True != 1, 8 != 8.0, '8' != 8), None never matches.
    """

    def __init__(self, rules):
        self.rules = [(rid, [self._items(p) for p in pats]) for rid, pats in rules]

    @staticmethod
    def _items(d):
        return frozenset((k, type(v).__name__, v) for k, v in d.items() if v is not None and not isinstance(v, list))

    def match(self, facts):
        encoded = [self._items(f) for f in facts]
        out = []
        for rid, pats in self.rules:
            combo = []
            for p in pats:
                hit = next((i for i, e in enumerate(encoded) if p <= e), None)
                if hit is None:
                    break
                combo.append(dict(facts[hit]))
            else:
                out.append((rid, combo))
        return out


def _current_rss_mb() -> float:
    """Resident memory now (Linux /proc/self/statm), MB; falls back to the peak (ru_maxrss)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def signature(firings):
    return tuple((f.rule.id, f.fired, f.severity, repr(sorted(f.numbers.items())), f.message, f.reason) for f in firings)


class Recorder:
    """Wraps the compiled engine and keeps its last answer, to compare it with the pure-Python matcher."""

    def __init__(self, compiled):
        self.compiled, self.last = compiled, None

    def match(self, facts):
        self.last = self.compiled.match(facts)
        return self.last


def _first_combinations(matches):
    out = {}
    for rid, combo in matches:
        out.setdefault(rid, combo)
    return out


def _generator(catalog, seed=20240611):
    """Random but valid stacks over the bundled models, parallel sizes, techniques and engine settings."""
    rng = random.Random(seed)
    models = [resolve_model(m) for m in bundled_model_ids()]
    optional = ["prefix-caching", "chunked-prefill", "speculative-decoding", "multi-lora-serving", "expert-parallelism",
                "kv-cache-connector", "cuda-graphs", "pipeline-parallelism", "dp-attention", "expert-load-balancing-eplb",
                "prefill-context-parallelism", "sequence-parallelism", "kv-cache-quantization", "fp8-block-quantization",
                "gptq-quantization", "awq-quantization", "prefill-decode-disaggregation", "torch-compile"]
    optional = [t for t in optional if t in catalog.techniques]
    hardware = sorted(catalog.hardware)
    while True:
        st = Stack(name="generated", model=rng.choice(models), engine=rng.choice(["vllm", "sglang", "trtllm", None]))
        st.engine_version = rng.choice([None, "0.4.0", "0.6.4", "0.7.3", "0.8.2", "0.10.2", "0.11.0", "0.12.0", "0.5.4"])
        if hardware and rng.random() < 0.6:
            st.hardware = catalog.hardware[rng.choice(hardware)]
        add_technique(st, catalog, "tensor-parallelism", {"tp_size": rng.choice([1, 2, 3, 4, 8, 16, 32])}, "gen")
        if rng.random() < 0.3:
            add_technique(st, catalog, "decode-context-parallelism", {"dcp_size": rng.choice([1, 2, 4, 8])}, "gen")
        for t in rng.sample(optional, rng.randint(0, 5)):
            add_technique(st, catalog, t, None, "gen")
        for key, values in (("kv_cache_dtype", ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "nvfp4", "fp4_e2m1"]),
                            ("attention_backend", ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLASHMLA", "CUTLASS_MLA",
                                                   "trtllm_mha", "fa3", "triton", "flashmla"]),
                            ("quantization", ["fp8", "awq", "gptq", "gptq_marlin", "awq_marlin"]),
                            ("block_size", [1, 16, 32, 64, 128]), ("pp_size", [1, 2, 4]), ("dp_size", [1, 2, 3, 8]),
                            ("ep_size", [1, 4, 8]), ("max_model_len", [4096, 32768, 131072]),
                            ("max_num_batched_tokens", [256, 2048, 8192]), ("speculative_method", ["eagle", "mtp", "ngram"]),
                            ("kv_connector", ["LMCacheConnectorV1", "NixlConnector"]), ("kv_budget_gib", [20.0, 46.8])):
            if rng.random() < 0.35:
                value = rng.choice(values)
                # a KV budget above the GPU's memory is an input error now (exit 2), not a stack to check
                if key == "kv_budget_gib" and st.hardware and value > _visible_gib(st.hardware):
                    continue
                set_setting(st, key, value, "gen", catalog)
        yield st


def _visible_gib(hw) -> float:
    """The memory a GPU shows the engine (memory_visible_mib where the entry has it, else memory_gib)."""
    return float(hw["memory_visible_mib"]) / 1024 if hw.get("memory_visible_mib") else float(hw.get("memory_gib") or 0)


def _fixture_inputs(catalog, check_rules):
    ids = {r.id for r in check_rules.rules}
    out = []
    for case in load_fixture_cases():
        if case.rule in ids:
            base = Path(case.file).parent
            out.append(fixture_stack(case.input, catalog, base))
    return out


def _evaluate(rs, stack, prepared=None):
    facts, ns = prepared or stack_facts(stack)
    return signature(evaluate_rules(rs, facts, ns, _functions(stack), stack.engine, stack.engine_version))


def test_every_rule_over_fixtures_and_generated_stacks(catalog, check_rules, monkeypatch):
    # durable-rules itself matches every input: no answer is read from or kept in the cache (kg.engine.durable keeps
    # a check's matches by content; a later process or worker of the session would read them back)
    monkeypatch.setattr(durable, "KEEP_MATCHES", False)
    fixtures = _fixture_inputs(catalog, check_rules)
    assert len(fixtures) > 100
    gen = _generator(catalog)
    total = len(fixtures) + N_STACKS
    sample = set(random.Random(5).sample(range(total), SINGLE_RUN_SAMPLE))
    engine = RuleSet(check_rules.kind, check_rules.rules, check_rules.thresholds)
    recorder = Recorder(engine.compiled)
    engine._compiled = recorder
    oracle = PyMatcher([(r.id, r.match) for r in check_rules.rules])
    half = len(fixtures) + N_STACKS // 2
    fired_rules: set[str] = set()
    kept: dict[int, tuple] = {}  # only the sampled stacks and their answers are kept, so memory stays flat
    rss_mid = now_mid = None
    for i in range(total):
        st = fixtures[i] if i < len(fixtures) else next(gen)
        if i == half:
            rss_mid = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            now_mid = _current_rss_mb()
        prepared = stack_facts(st)
        sig = _evaluate(engine, st, prepared)
        # the engine's structural matches are exactly the pure-Python matcher's
        assert _first_combinations(recorder.last) == _first_combinations(oracle.match(prepared[0])), \
            f"engine and pure-Python matcher disagree on stack {i}"
        fired_rules |= {s[0] for s in sig if s[1]}
        if i in sample:
            kept[i] = (st, sig)
    rss_end = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    now_end = _current_rss_mb()
    growth_mb = (rss_end - rss_mid) / 1024  # ru_maxrss is KiB on Linux
    print(f"RSS {now_mid:.1f} -> {now_end:.1f} MB, peak {rss_mid / 1024:.1f} -> {rss_end / 1024:.1f} MB "
          f"over the second {N_STACKS // 2} stacks")
    assert growth_mb < RSS_GROWTH_LIMIT_MB, f"peak RSS grew {growth_mb:.1f} MB over {N_STACKS // 2} stacks"
    assert now_end - now_mid < RSS_GROWTH_LIMIT_MB, f"RSS grew {now_end - now_mid:.1f} MB over {N_STACKS // 2} stacks"
    # every shipped check rule fired somewhere (the fixtures guarantee it)
    assert fired_rules == {r.id for r in check_rules.rules}
    # single runs: a brand-new compiled ruleset (new durable rulesets), fed one stack, answers exactly
    # as the long-lived one did
    for i, (st, sig) in sorted(kept.items(), key=lambda kv: kv[0]):
        fresh = RuleSet(check_rules.kind, check_rules.rules, check_rules.thresholds)
        assert _evaluate(fresh, st) == sig, f"stack {i} differs when run alone"


def test_partitioning_at_ten_times_the_shipped_rules(check_rules):
    n_rules = 10 * len(check_rules.rules)
    attentions = ["gqa", "mla", "mha", "mqa"]
    rules = []
    for i in range(n_rules):
        pats = [{"kind": "technique", "technique": f"t{i % 97}"}]
        if i % 3:
            # > 64 rules share this one condition in total, and > 512 distinct 'slot' conditions exist
            pats.append({"kind": "model", "attention": attentions[i % 4]})
        if i % 5 == 0:
            pats.append({"kind": "synthetic", "slot": i})
        rules.append((f"r{i:04d}", pats))
    compiled = CompiledRules(rules, label="stress10x")
    assert len(compiled._chunks) == math.ceil(n_rules / CHUNK)
    assert all(len(part) <= CHUNK for _, part in compiled._chunks)
    shared = sum(1 for _, pats in rules if {"kind": "model", "attention": "gqa"} in pats)
    assert shared > 64
    oracle = PyMatcher(rules)
    rng = random.Random(11)
    for _ in range(15):
        facts = [{"kind": "technique", "technique": f"t{j}"} for j in rng.sample(range(97), rng.randint(1, 12))]
        facts.append({"kind": "model", "attention": rng.choice(attentions), "is_moe": rng.random() < 0.5})
        facts += [{"kind": "synthetic", "slot": s} for s in rng.sample(range(0, n_rules, 5), 20)]
        got = sorted({rid for rid, _ in compiled.match(facts)})
        want = sorted({rid for rid, _ in oracle.match(facts)})
        assert got == want
        assert got, "each fact set should match some rules"


def test_ruleset_of_ten_times_the_rules_through_evaluate_rules(check_rules):
    # the same partitioning through the public path: shipped rules repeated 10x under new ids
    from dataclasses import replace
    many = [replace(r, id=f"{r.id}-x{k}", parent=(f"{r.parent}-x{k}" if r.parent else None))
            for k in range(10) for r in check_rules.rules]
    big = RuleSet("check", many, check_rules.thresholds)
    stack_rules = check_rules
    facts = [{"kind": "stack", "engine": "vllm"}, {"kind": "technique", "technique": "tensor-parallelism"},
             {"kind": "model", "attention": "gqa", "is_moe": True, "has_sliding_window": False, "quant_method": "none"}]
    ns = {"tp_size": 8, "pp_size": 1, "dp_size": 1, "dcp_size": 1, "num_key_value_heads": 4, "num_attention_heads": 64,
          "attention": "gqa", "kv_replication": 2, "kv_bytes_per_token_per_gpu": 48128,
          "kv_bytes_per_token_per_gpu_unreplicated": 24064, "valid_dcp_sizes": [1, 2], "max_useful_dcp_size": 2,
          "valid_tp_sizes": [1, 2, 4, 8, 16, 32, 64]}
    has = {"has": lambda tid: tid == "tensor-parallelism"}
    one = [f for f in evaluate_rules(stack_rules, facts, ns, has, engine="vllm") if f.fired]
    ten = [f for f in evaluate_rules(big, facts, ns, has, engine="vllm") if f.fired]
    assert {f.rule.id for f in one} == {"kv-head-replication"}
    assert sorted(f.rule.id for f in ten) == sorted(f"kv-head-replication-x{k}" for k in range(10))
    assert all(f.numbers == one[0].numbers for f in ten)
