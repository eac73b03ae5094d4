"""What a sweep reuses from an earlier stack besides rules and check rows (kg.engine.incremental): the effective
configuration (kg.inputs.effective replays it for a stack with the same values of the names its defaults read),
the rules' value numbers and the rows' moved names. Each must give what a fresh evaluation gives.
"""
from __future__ import annotations

import pytest

from kg.engine.incremental import Session, use
from sweep_reports import incremental_and_fresh

CMD = "vllm serve Qwen/Qwen3-235B-A22B --max-model-len 32768 --no-enable-chunked-prefill --tp 2"


@pytest.fixture(scope="module")
def stacks(catalog):
    """Stack maker: the command with ``extra`` flags, on 8 H200, sharing one model object (as a sweep's stacks do)."""
    from kg.engines.launch import parse_command
    model = parse_command(CMD, catalog, "vllm").model

    def make(extra: str = ""):
        st = parse_command(f"{CMD} {extra}", catalog, "vllm")
        st.hardware, st.gpu_count, st.model = catalog.resolve_hardware("H200"), 8, model
        return st
    return make


def _effective(st, session):
    from kg.engines import of
    from kg.inputs.effective import effective_configuration
    with use(session):
        out = effective_configuration(st, of(st).release_facts)
    return out, st


def test_a_sweep_replays_the_effective_configuration_only_for_the_same_values_its_defaults_read(stacks, monkeypatch):
    import kg.inputs.effective as eff
    runs = []
    real = eff._apply_defaults
    monkeypatch.setattr(eff, "_apply_defaults", lambda *a: runs.append(1) or real(*a))
    session = Session()
    a, st_a = _effective(stacks(), session)
    b, st_b = _effective(stacks("--tp 4"), session)  # TP (same techniques): no default reads it: replayed
    c, st_c = _effective(stacks("--max-model-len 4096"), session)  # read by max_num_batched_tokens: run again
    assert len(runs) == 2
    # chunked prefill off: max_num_batched_tokens = max(max_model_len, 8,192 on a 70-160 GiB GPU)
    # (catalog/engines/releases/vllm.yaml, vLLM 0.34.0 engine/arg_utils.py)
    mnbt = {x["setting"]: x for x in a}["max_num_batched_tokens"]
    assert (mnbt["value"], mnbt["source"]) == (32768, "engine default")
    assert {x["setting"]: x["value"] for x in b}["max_num_batched_tokens"] == 32768
    assert {x["setting"]: x["value"] for x in c}["max_num_batched_tokens"] == 8192
    assert st_b.settings["max_num_batched_tokens"] == 32768 and st_c.settings["max_num_batched_tokens"] == 8192
    for extra, got, st in (("", a, st_a), ("--tp 4", b, st_b), ("--max-model-len 4096", c, st_c)):
        fresh, st_f = _effective(stacks(extra), None)
        assert got == fresh  # every entry: value, source, releases, evidence, why
        assert (st.settings, st.techniques, st.defaulted, st.notes) == \
            (st_f.settings, st_f.techniques, st_f.defaulted, st_f.notes)
    for x in a + b:  # a caller's change to an entry (check --max-model-len auto does) is not replayed
        x["why"] = "changed by a caller"
    done = len(runs)
    again, _ = _effective(stacks("--tp 8"), session)
    assert len(runs) == done and again == _effective(stacks("--tp 8"), None)[0]


def _sweep(catalog, check_rules, cmd, axes):
    """(incremental, fresh) check reports of every combination of a small sweep on 8 H200."""
    return incremental_and_fresh(catalog, check_rules, cmd, axes, 8)


def test_a_sweep_whose_axis_drops_a_setting_gives_the_fresh_reports(catalog, check_rules):
    """--quantization none drops the setting the generated rows read (and fp8 brings it back): the rows compare the
    names of both stacks' facts, so the dropped one moves (compared with this stack's names only, it did not, and
    the 2nd stack kept the 1st's row outcomes)."""
    got, want = _sweep(catalog, check_rules, "vllm serve Qwen/Qwen3-32B --max-model-len 8192",
                       {"quantization": ["fp8", "none", "fp8"]})
    assert got == want
    assert [r["stack"]["settings"].get("quantization") for r in got] == ["fp8", None, "fp8"]


def test_rules_reading_a_changed_value_get_a_new_number_for_it(catalog, check_rules):
    """TP 4 -> 8 -> 16 (one technique set): the rules keep the last stack's numbers of the values that did not change
    and number tp_size and what follows from it again; with the old number kv-head-replication (Qwen3-235B-A22B has 4
    KV heads: replicated from TP 8) would keep TP 4's Firing."""
    got, want = _sweep(catalog, check_rules, "vllm serve Qwen/Qwen3-235B-A22B --max-model-len 32768",
                       {"tp_size": [4, 8, 16]})
    assert got == want
    fired = [[f["rule_id"] for f in r["findings"] if f["rule_id"] == "kv-head-replication"] for r in got]
    assert fired == [[], ["kv-head-replication"], ["kv-head-replication"]]
