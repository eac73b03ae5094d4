"""Three outcomes per applicable rule - fired, held, not evaluable (naming the missing facts) - and a
report that never says "No findings" when rules could not run (issue 12, step 2)."""
import json

from kg.engine.rules import Rule, RuleSet, evaluate_rules
from kg.output.report import summary_line

SRC = [{"title": "t", "url": "https://example.org"}]


def _rule(rid, match, condition=None, **kw):
    return Rule(id=rid, ruleset="check", title=rid, match=match, message="m", sources=SRC, severity="warning",
                condition=condition, **kw)


def test_each_rule_gets_one_of_four_outcomes():
    rs = RuleSet("check", [
        _rule("fires", [{"kind": "model"}], "tp_size > 4"),
        _rule("holds", [{"kind": "model"}], "tp_size > 16"),
        _rule("holds-short-circuit", [{"kind": "model"}], "tp_size > 16 and max_num_seqs > 64"),
        _rule("unknown", [{"kind": "model"}], "tp_size > 4 and max_num_seqs > 64 and attention_backend == 'x'"),
        _rule("needs-hw", [{"kind": "model"}, {"kind": "hardware"}], "tp_size > 1"),
        _rule("other-attention", [{"kind": "model", "attention": "mla"}], "tp_size > 1"),
        _rule("absent-technique", [{"kind": "technique", "technique": "lora"}], "tp_size > 1"),
        _rule("other-engine", [{"kind": "model"}], "tp_size > 1", applies_to={"engines": ["sglang"]}),
        _rule("bad-types", [{"kind": "model"}], "kv_cache_dtype > 4"),
    ], {})
    facts = [{"kind": "stack", "engine": "vllm"}, {"kind": "model", "attention": "gqa"}]
    got = {f.rule.id: (f.outcome, f.missing) for f in
           evaluate_rules(rs, facts, {"tp_size": 8, "kv_cache_dtype": "auto"}, engine="vllm")}
    assert got == {
        "fires": ("fired", []),
        "holds": ("held", []),
        "holds-short-circuit": ("held", []),  # false before the missing fact is reached: decided
        "unknown": ("not_evaluable", ["attention_backend", "max_num_seqs"]),  # every missing name, sorted
        "needs-hw": ("not_evaluable", ["hardware"]),
        "other-attention": ("held", []),
        "absent-technique": ("not_applicable", []),
        "other-engine": ("not_applicable", []),
        "bad-types": ("not_evaluable", []),
    }


def test_summary_line_counts_and_names_what_is_missing():
    d = {"findings": [{"severity": "error"}, {"severity": "warning"}, {"severity": "error"}],
         "outcomes": {"fired": 3, "held": 74, "not_evaluable": 3, "not_applicable": 40},
         "not_evaluable": [{"rule_id": "a", "needs": ["hardware"]}, {"rule_id": "b", "needs": ["max_num_seqs", "hardware"]},
                           {"rule_id": "c", "needs": ["attention_backend"]}]}
    assert summary_line(d) == ("3 finding(s) (2 error, 1 warning) · 74 rules held · 3 could not be evaluated "
                               "(missing: hardware, attention_backend, max_num_seqs)")
    d2 = {"findings": [], "outcomes": {"held": 5}, "not_evaluable": []}
    assert summary_line(d2) == "0 finding(s) · 5 rules held · 0 could not be evaluated"


CAPACITY = {"weights-do-not-fit", "kv-budget-exhausted", "max-model-len-exceeds-kv-capacity",
            "parallel-size-exceeds-gpu-count"}


def test_no_gpu_lists_capacity_rules_as_not_evaluable(cli):
    code, out, err = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["schema_version"] == "1.1"
    ne = {u["rule_id"]: u for u in d["not_evaluable"]}
    assert CAPACITY <= set(ne)
    assert all(ne[r]["needs"] == ["hardware"] for r in CAPACITY)
    assert d["outcomes"]["not_evaluable"] == len(d["not_evaluable"])
    code, text, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert "No findings" not in text
    assert "  hardware (--gpu NAME): weights-do-not-fit, " in text  # one line per missing fact, how to give it
    last = text.rstrip().splitlines()[-1]
    n, held, unknown = len(d["findings"]), d["outcomes"]["held"], len(d["not_evaluable"])
    assert last.startswith(f"{n} finding(s) (")
    # the names that fit in 100 columns, the most frequent first; the list above names every one
    assert f" · {held} rules held · {unknown} could not be evaluated (missing: hardware" in last and len(last) <= 100


def test_an_unknown_gpu_is_an_error_and_a_described_one_runs_the_hardware_rules(cli):
    """An unknown GPU used to be a note with every hardware rule skipped, exit 0: in CI a GPU typo turned the
    memory checks green (hostile_inputs_turn3.md #18). Now exit 2 with the closest names; a GPU the catalog
    lacks is described by --gpu-memory-gib, and the rules that need only its memory run."""
    code, out, err = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H999")
    assert code == 2 and err.startswith("optkg: error: --gpu: unknown GPU 'H999'; ") and "--gpu-memory-gib" in err
    code, out, err = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H999",
                         "--gpu-memory-gib", "80", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert "kv-head-replication" in {f["rule_id"] for f in d["findings"]}
    assert "weights-do-not-fit" not in {u["rule_id"] for u in d["not_evaluable"]}  # it needs the memory: given
    code, _, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H200", "--count", "8",
                     "--kv-budget-gib", "60", "--fail-on", "never", "--fail-on-unknown", "--format", "json")
    assert code == 1  # still some rules miss settings (e.g. host_memory_gib); CI asked to fail on that


def test_an_unknown_gpu_in_a_stack_file_is_an_error_naming_its_line(cli, tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("model: Qwen/Qwen3-235B-A22B\nhardware: {gpu: Z9000, count: 8}\n"
                 "techniques: [{tensor-parallelism: {tp_size: 8}}]\n")
    code, out, err = cli("check", str(f), "--format", "json")
    assert code == 2 and f"{f}:2: unknown GPU 'Z9000'" in err and "memory_gib: N" in err
    f.write_text("model: Qwen/Qwen3-235B-A22B\nhardware: {gpu: Z9000, count: 8, memory_gib: 96}\n"
                 "techniques: [{tensor-parallelism: {tp_size: 8}}]\n")
    code, out, err = cli("check", str(f), "--format", "json")
    assert code in (0, 1), err
    assert "weights-do-not-fit" not in {u["rule_id"] for u in json.loads(out)["not_evaluable"]}


def test_rules_about_an_absent_draft_or_an_unquantised_checkpoint_hold_instead_of_missing_facts():
    # `vllm serve Qwen/Qwen3-235B-A22B -tp 8 --nnodes 1` on 8 H100s: no speculative decoding (draft_kind 'none'),
    # a BF16 checkpoint (checkpoint_quant_family 'none'), one node: these rules are decided, not "missing a fact"
    from conftest import run_cli

    def check_json(argv):
        code, out, err = run_cli("check", *argv, "--format", "json", "--no-speed")  # the Speed section is not read
        assert code in (0, 1), err
        return json.loads(out)
    d = check_json(["--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --nnodes 1", "--gpu", "H100-SXM", "--count", "8"])
    missing = {x["rule_id"] for x in d["not_evaluable"]}
    for rid in ("draft-context-shorter-than-max-model-len", "quantization-method-mismatch", "tp-spans-nodes",
                "ep-spans-nodes"):
        assert rid not in missing, rid
        assert rid not in {f["rule_id"] for f in d["findings"]}, rid
    assert d["derived"]["draft_kind"] == "none"
    # without --nnodes the node size comes from the hardware entry (the DGX H100 node of 8 GPUs, tester-4 #10)
    # and the report says so; a GPU without one (L40S) leaves the nodes unknown: vLLM before 0.11.1 (and Ray
    # clusters) span nodes without the flag
    d = check_json(["--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--gpu", "H100-SXM", "--count", "8"])
    assert "tp-spans-nodes" not in {x["rule_id"] for x in d["not_evaluable"]}
    assert d["derived"]["nodes_assumed"] == ("1 node of 8 GPUs (H100-SXM node (catalog/hardware); "
                                             "--nnodes / gpus_per_node say otherwise)")
    # a 2-GPU job is not a node of 8: it uses 2 of them (newuser5 #19e)
    d = check_json(["--vllm", "vllm serve Qwen/Qwen3-32B -tp 2", "--gpu", "H100-SXM", "--count", "2"])
    assert d["derived"]["nodes_assumed"] == ("1 node of 8 GPUs, 2 used (H100-SXM node (catalog/hardware); "
                                             "--nnodes / gpus_per_node say otherwise)")
    d = check_json(["--vllm", "vllm serve Qwen/Qwen3-32B -tp 4", "--gpu", "L40S", "--count", "4"])
    assert "tp-spans-nodes" in {x["rule_id"] for x in d["not_evaluable"]}


def test_a_condition_false_without_the_absent_facts_holds():
    # fp8-weights-without-fp8-hardware on a BF16 model with no GPU: `weight_is_fp8 and ...` is false whatever
    # the hardware fact would say, so the rule held (tester finding 11); with FP8 weights it still needs hardware
    rs = RuleSet("check", [
        _rule("fp8-needs-hw", [{"kind": "model"}, {"kind": "hardware"}], "weight_is_fp8 and compute_capability < 8.9"),
        _rule("true-without-hw", [{"kind": "model"}, {"kind": "hardware"}], "tp_size > 1"),
    ], {})
    facts = [{"kind": "stack", "engine": "vllm"}, {"kind": "model", "attention": "gqa"}]
    for fp8, want in ((False, ("held", [])), (True, ("not_evaluable", ["hardware"]))):
        got = {f.rule.id: (f.outcome, f.missing) for f in
               evaluate_rules(rs, facts, {"tp_size": 8, "weight_is_fp8": fp8}, engine="vllm")}
        assert got["fp8-needs-hw"] == want, fp8
        assert got["true-without-hw"] == ("not_evaluable", ["hardware"])  # true needs the hardware to decide


def test_sglang_without_context_length_holds_the_context_limit_rule():
    # tester-4 #16: SGLang stacks listed max-model-len-exceeds-max-position-embeddings as 'missing max_model_len';
    # without --context-length SGLang runs at the derived limit itself, which cannot exceed it
    from conftest import run_cli
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B "
                             "--tp 8", "--gpu", "H100", "--count", "8", "--format", "json", "--no-speed")
    d = json.loads(out)
    assert "max-model-len-exceeds-max-position-embeddings" not in {x["rule_id"] for x in d["not_evaluable"]}
    assert d["derived"]["max_model_len_effective"] == d["derived"]["max_model_len_limit"] == 40960


def test_the_demo_leaves_the_user_only_facts_they_can_give(cli):
    """vLLM picks the attention backend (and the block size) itself, among those whose validation passes (vllm
    0.34.0 platforms/cuda.py:494-520): rules about a refused explicit choice hold when the stack makes none, instead
    of asking for attention_backend / block_size. What is left has a way to give it."""
    code, out, err = cli("check", "examples/qwen3-235b-tp8.yaml", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    needs = sorted({n for u in d["not_evaluable"] for n in u["needs"]})
    assert needs == ["prefix_reuse_ratio"]
    assert set(d["how_to_give"]) == set(needs)
    # an explicit backend the model cannot run is still refused (Phi-3-mini: head_dim 96 on FLASHINFER)
    code, out, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --attention-backend FLASHINFER "
                       "--block-size 48", "--gpu", "H200", "--count", "8", "--format", "json")
    ids = {f["rule_id"] for f in json.loads(out)["findings"]}
    assert "flashinfer-head-size" not in ids  # head_dim 128 is supported: held
