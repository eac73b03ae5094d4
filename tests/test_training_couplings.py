"""The training report runs the catalog's coupling rules on the job's techniques (issue 12: the graph drives
the checks for training too): fired / held / not evaluable outcomes as in the serving report, and a hand rule
that ``refines`` a coupling names the coupling's techniques and carries its source.

Done when (issue 12): DeepSpeed ZeRO-2 with pipeline parallelism is an error naming both techniques with the
coupling's source - from a real DeepSpeed JSON + launcher line (DeepSpeedExamples#86) and from a stack YAML -
and ZeRO-1 does not fire.
"""
import json

from conftest import REPO

CASES = REPO / "tests/fixtures/training_cases"
# DeepSpeedExamples#86: ds_pretrain_gpt2.sh, 3D parallelism with ds_zero_stage_2_config.json
LAUNCH_86 = ("deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt2.py --model-parallel-size 2 --pipe-parallel-size 2 "
             "--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --deepspeed "
             "--deepspeed_config {cfg}")
COUPLING_URL = "https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/pipe/engine.py"  # zero-2.yaml
STACK = """name: DeepSpeed ZeRO with pipeline parallelism
framework: deepspeed
model: meta-llama/Llama-3.1-8B
hardware: {{gpu: H100, count: 8}}
techniques: [{zero}, {{pipeline-parallelism: {{pp_size: 4}}}}]
training: {{micro_batch_size: 1, global_batch_size: 16, seq_length: 4096}}
"""


def _zero_pp(d):
    return [f for f in d["findings"] if f["rule_id"] == "deepspeed-zero-with-pipeline-engine"]


def test_deepspeed_json_and_launcher_zero2_pp_names_both_techniques_and_the_coupling_source(cli):
    code, out, _ = cli("check", "--cmd", LAUNCH_86.format(cfg=CASES / "ds_zero2.json"), "--format", "json")
    d = json.loads(out)
    assert code == 1 and d["kind"] == "training"
    (f,) = _zero_pp(d)
    assert f["severity"] == "error" and f["techniques"] == ["zero-2", "pipeline-parallelism"]
    assert f["coupling"] == "zero-2/conflicts_with/pipeline-parallelism"
    urls = [s["url"] for s in f["sources"]]
    assert urls[0] == "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/pipe/engine.py"
    assert COUPLING_URL in urls and "https://github.com/microsoft/DeepSpeed/issues/1110" in urls
    # the generated coupling rule is replaced by the hand rule, not reported twice
    assert not [x for x in d["findings"] if x["rule_id"].startswith("coupling-zero-2-conflicts")]
    assert d["stack"]["techniques"] == ["3d-parallelism", "data-parallelism", "gradient-accumulation",
                                        "pipeline-parallelism", "tensor-parallelism", "zero-1", "zero-2"]
    # and the pipeline bubble of m = 2 micro-batches over 2 stages: (2 - 1)/2 = 50 %
    assert [x["rule_id"] for x in d["findings"]] == ["deepspeed-zero-with-pipeline-engine", "training-pipeline-bubble"]
    assert d["outcomes"]["fired"] == 2 and d["schema_version"] == "1.3"  # 1.2: PP/DP may be null (unknown); 1.3: speed


def test_deepspeed_zero1_json_and_launcher_does_not_fire(cli, tmp_path):
    cfg = tmp_path / "ds_zero1.json"
    cfg.write_text((CASES / "ds_zero2.json").read_text().replace('"stage": 2', '"stage": 1'))
    code, out, _ = cli("check", "--cmd", LAUNCH_86.format(cfg=cfg), "--format", "json")
    d = json.loads(out)
    assert code == 0 and not _zero_pp(d) and not [f for f in d["findings"] if f["severity"] == "error"]
    assert "zero-1" in d["stack"]["techniques"] and "zero-2" not in d["stack"]["techniques"]


def test_stack_yaml_zero2_pp_text_report_and_zero1(cli, tmp_path):
    f = tmp_path / "ds.yaml"
    f.write_text(STACK.format(zero="zero-2"))
    code, out, _ = cli("check", str(f))
    assert code == 1
    assert "ERROR deepspeed-zero-with-pipeline-engine: ZeRO stage 2/3 with DeepSpeed's pipeline engine" in out
    assert "      techniques: zero-2, pipeline-parallelism" in out
    # the line is over 100 columns, so it continues on the next (its URL whole)
    assert (f"      source: DeepSpeed runtime/pipe/engine.py (assert zero_optimization_stage() < 2)\n"
            f"          <{COUPLING_URL}>") in out
    assert "rule: rules/training.yaml:" in out and "(refines coupling zero-2/conflicts_with/pipeline-parallelism)" in out
    # + the bubble of PP 4 over global 16 / (micro 1 x DP 2) = 8 micro-batches: 3/8 = 37.5 %
    assert "WARN  training-pipeline-bubble" in out and "(4 - 1)/(8 x 1) = 37.5%" in out
    assert out.rstrip().splitlines()[-1].startswith("2 finding(s) (1 error, 1 warning) · ")
    f.write_text(STACK.format(zero="zero-1"))
    code, out, _ = cli("check", str(f))
    assert code == 0 and "ERROR" not in out and "deepspeed-zero-with-pipeline-engine" not in out
    assert out.rstrip().splitlines()[-1] == "1 finding(s) (1 warning) · 17 rules held · 0 could not be evaluated"


def test_zero3_pp_names_zero3(cli, tmp_path):
    f = tmp_path / "ds.yaml"
    f.write_text(STACK.format(zero="zero-3-fsdp"))
    d = json.loads(cli("check", str(f), "--format", "json")[1])
    (hit,) = _zero_pp(d)
    assert hit["techniques"] == ["zero-3-fsdp", "pipeline-parallelism"]
    assert hit["coupling"] == "zero-3-fsdp/conflicts_with/pipeline-parallelism"


def test_couplings_of_other_stages_stay_out_of_a_training_report(cli):
    # pipeline parallelism x KV bytes per token (a serving property) and x larger batches (max_num_seqs, an
    # inference technique) are not training couplings; the 70B Megatron example holds both TP and PP
    code, out, _ = cli("check", str(REPO / "examples/llama-3.1-70b-megatron-train.yaml"), "--format", "json")
    d = json.loads(out)
    ids = {x["rule"] for x in d.get("not_fired", [])} | {x["rule_id"] for x in d["in_effect"]} \
        | {x["rule_id"] for x in d["not_evaluable"]}
    assert "coupling-pipeline-parallelism-mitigates-kv-bytes-per-token" not in ids
    assert "coupling-pipeline-parallelism-requires-larger-batch-size" not in ids
    assert d["not_evaluable"] == []
    assert [e["coupling"] for e in d["in_effect"]] == ["data-parallelism/replaces/tensor-parallelism",
                                                       "gradient-accumulation/mitigates/pipeline-parallelism"]


def test_validate_checks_training_rules_that_refine(catalog):
    from kg.engine.rules import load_rules
    from kg.knowledge.couplings import refine_problems
    rs, problems = load_rules("training")
    assert not problems
    assert refine_problems(catalog, rs) == []
    refining = sorted(r.id for r in rs.rules if r.refines)
    assert refining == ["deepspeed-zero-with-pipeline-engine", "fsdp-full-shard-spans-nodes", "training-ep-without-experts",
                        "training-experts-not-divisible-by-ep", "training-fp8-needs-sm89",
                        "training-heads-not-divisible-by-tp"]


# framework -> the distribution whose releases `applies_to.versions` counts (Megatron: megatron-core)
FRAMEWORK_PACKAGES = {"megatron": "megatron-core", "deepspeed": "deepspeed", "torchtitan": "torchtitan",
                      "hf-trainer": "transformers", "fsdp": "torch", "trl": "trl"}
# frameworks that drive one of the above (NeMo/verl run Megatron-core, OpenRLHF DeepSpeed, TRL transformers):
# a rule may list them without a range of their own when the framework they drive is bounded
DRIVERS = {"nemo", "verl", "openrlhf", "trl"}
# the newest release of each distribution whose source the evidence was read in (/work/dl): an open range
# claims the fact still holds there
NEWEST = {"megatron-core": "0.16.1", "deepspeed": "0.19.8", "torchtitan": "0.3.0", "transformers": "5.24.0",
          "accelerate": "1.15.0", "transformer-engine": "2.20.2", "torch": "2.14.1", "trl": "1.16.0",
          "peft": "0.21.2", "megatron-lm": "core_v0.16.1", "torchao": "0.18.0"}
# named exceptions, each with its reason
UNBOUNDED: dict[str, str] = {
    "accelerate-fsdp-auto-wrap-policy-unknown": "accelerate's own check (1.15.0 read); the job's accelerate release is "
                                                "not an input, and torch / transformers releases do not bound it",
    "megatron-recompute-activations-overrides-granularity": "Megatron-LM's validate_args (megatron/training/, not in "
                                                            "the megatron-core wheel): the same lines at every tag read, "
                                                            "23.04 to core_v0.16.1 and d98e8a64"}


def test_training_rules_carry_release_evidence():
    # issue 16: every training rule cites the released source; every framework-specific one names the framework
    # releases it holds for (a lower bound, an upper one where a release changed it), with evidence inside the
    # range, a `role: changed` item outside it, and an item at the newest release read when the range is open.
    # megatron-core items verified with `optkg evidence --engine megatron-core --wheel-dir ... --offline` (32 of 32);
    # the deepspeed items against the 0.8.3 / 0.14.0 / 0.16.0 / 0.19.2 / 0.19.3 / 0.19.8 sdists, torch against
    # the 2.1.0 / 2.2.0 / 2.5.1 / 2.13.0 / 2.14.1 wheels (macOS arm64 builds: the Python sources are the same on every platform)
    from kg.engine.rules import load_rules
    from kg.engine.scope import bounds, contains
    rs, problems = load_rules("training")
    assert not problems
    assert len(rs.rules) == 49  # + torchtitan-ddp-with-model-parallelism
    bad = []
    for r in rs.rules:
        if not r.evidence:
            bad.append((r.id, "no evidence"))
        for e in r.evidence:
            if not set(e) >= {"package", "release", "path", "line", "snippet"}:
                bad.append((r.id, f"evidence item lacks fields: {e}"))
            elif e["package"] not in NEWEST:
                bad.append((r.id, f"evidence from unknown package {e['package']}"))
        engines = r.applies_to.get("engines") or []
        if not engines or r.id in UNBOUNDED:
            continue
        versions = r.applies_to.get("versions")
        if not isinstance(versions, dict) or not versions:
            bad.append((r.id, f"no per-framework release range (versions: {versions!r})"))
            continue
        if set(versions) - set(engines):
            bad.append((r.id, f"ranges for frameworks it does not apply to: {sorted(set(versions) - set(engines))}"))
        for fw in engines:
            if fw not in versions and fw not in DRIVERS:
                bad.append((r.id, f"{fw} has no release range"))
        for fw, spec in versions.items():
            lower, upper = bounds(spec)
            if not lower:
                bad.append((r.id, f"{fw} range {spec!r} has no lower bound"))
            pkg = FRAMEWORK_PACKAGES[fw]
            mine = [e for e in r.evidence if e["package"] == pkg]
            holds = [e for e in mine if e.get("role") != "changed"]
            if not holds:
                bad.append((r.id, f"no {pkg} evidence inside {fw} {spec}"))
            for e in mine:
                inside = contains(spec, e["release"])
                if inside == (e.get("role") == "changed"):
                    bad.append((r.id, f"{pkg} {e['release']} lies {'inside' if inside else 'outside'} {spec}"))
            low = [s.version for s in __import__("packaging.specifiers").specifiers.SpecifierSet(spec) if s.operator == ">="]
            if low and not any(e["release"] == low[0] for e in holds):
                bad.append((r.id, f"no {pkg} evidence at the lower bound {low[0]}"))
            if not upper and not any(e["release"] == NEWEST[pkg] for e in holds):
                bad.append((r.id, f"open range {spec!r} but no {pkg} evidence at {NEWEST[pkg]}"))
    assert bad == []
    assert sorted(UNBOUNDED) == sorted(r.id for r in rs.rules if r.applies_to.get("engines")
                                       and not isinstance(r.applies_to.get("versions"), dict))
