"""`optkg new` -> fill -> `optkg validate` clean -> `optkg place` verdict, on temporary catalog copies.

Placement scores are checked against values worked out by hand on a small catalog built in the
test (see the comments); the end-to-end flow runs on a copy of the shipped catalog.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from catalog_copy import copy_catalog, dump, load, minimal_catalog, optkg, technique

ID = "jacobi-lookahead-decoding"
TRTLLM_SPEC = "https://nvidia.github.io/TensorRT-LLM/advanced/speculative-decoding.html"


def _fill(text: str) -> str:
    """What a contributor types over the template's TODOs: lookahead decoding (Fu et al., ICML 2024)."""
    repl = [
        ("name: TODO display name", "name: Lookahead decoding (Jacobi)"),
        ("summary: TODO one sentence in your own words",
         "summary: Generates n-grams in parallel by Jacobi iteration over a lookahead window and verifies the "
         "candidates in the same forward pass, cutting sequential decode steps without a draft model."),
        ("  stages: [TODO]", "  stages: [inference]"),
        ("  layers: [TODO]", "  layers: [L4, L5]"),
        ("  dimension: TODO", "  dimension: compute"),
        ("  - dimension: TODO\n    what: TODO what improves",
         "  - dimension: scheduling\n    what: fewer sequential decode steps per generated token"),
        ("  - dimension: TODO\n    what: TODO what is paid",
         "  - dimension: compute\n    what: extra FLOPs per step for the lookahead and verification branches"),
        ("couplings: []", f"""couplings:
  - kind: conflicts_with
    target: speculative-decoding
    from_dimension: compute
    to_dimension: compute
    mechanism: TensorRT-LLM runs one speculative decoding mode per engine, and lookahead is one of those modes.
    severity: error
    engines: [trtllm]
    sources:
      - title: TensorRT-LLM docs, Speculative decoding
        url: {TRTLLM_SPEC}
        kind: doc"""),
        ("  - title: TODO title of the paper, documentation page or source file\n    url: https://TODO",
         "  - title: Break the Sequential Dependency of LLM Inference Using Lookahead Decoding\n"
         "    url: https://arxiv.org/abs/2402.02057"),
    ]
    for a, b in repl:
        assert a in text, a
        text = text.replace(a, b, 1)
    return text


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = copy_catalog(tmp_path / "home")
    assert not (h / "catalog" / "techniques" / f"{ID}.yaml").exists()
    return h


def test_new_fill_validate_place(home: Path) -> None:
    techdir = home / "catalog" / "techniques"
    r = optkg(["new", ID], home)
    assert r.returncode == 0, r.stderr
    f = techdir / f"{ID}.yaml"
    text = f.read_text(encoding="utf-8")
    # editors get completion from the schema named on the first line
    first = text.splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schema/technique.schema.json"
    assert (techdir / "../schema/technique.schema.json").resolve().is_file()
    # the unfilled template does not validate: every TODO is named, enum fields list their values
    rv = optkg(["validate", str(f), "--format", "json"], home)
    assert rv.returncode == 2
    probs = json.loads(rv.stdout)["problems"]
    paths = {p["path"] for p in probs}
    assert {"name", "summary", "coordinates.stages[0]", "coordinates.layers[0]", "coordinates.dimension",
            "benefits[0].dimension", "costs[0].what", "references[0].url"} <= paths
    stages = next(p for p in probs if p["path"] == "coordinates.stages[0]")
    assert [v["value"] for v in stages["valid_values"]] == ["data", "training", "inference", "validation", "governance"]
    # refuses to overwrite, leaves the file alone
    again = optkg(["new", ID], home)
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr and again.stderr.count("\n") == 1
    assert f.read_text(encoding="utf-8") == text
    # filled in: clean
    f.write_text(_fill(text), encoding="utf-8")
    rv2 = optkg(["validate", str(f)], home)
    assert rv2.returncode == 0, rv2.stdout
    assert rv2.stdout.startswith("catalog OK:")
    # placement verdict
    rp = optkg(["place", str(f), "--format", "json", "--no-stacks"], home)
    assert rp.returncode == 0, rp.stderr
    d = json.loads(rp.stdout)
    assert d["schema_version"] == "1.0" and d["kind"] == "place"
    # cells: inference x {L4, L5} x compute
    assert [(c["stage"], c["layer"], c["dimension"]) for c in d["cells"]] == [("inference", "L4", "compute"),
                                                                              ("inference", "L5", "compute")]
    spec = load(techdir / "speculative-decoding.yaml")
    if spec["coordinates"]["stages"] == ["inference"] and spec["coordinates"]["layers"] == ["L4", "L5"] \
            and spec["coordinates"]["dimension"] == "compute":
        # speculative decoding sits in the same two cells: coordinate overlap 2/2 = 1
        cand = next(c for c in d["candidates"] if c["id"] == "speculative-decoding")
        assert cand["coordinate_overlap"] == 1.0
        assert d["verdict"] == "replacement-candidates"
    added = [(c["direction"], c["from"], c["kind"], c["to"]) for c in d["couplings_added"]]
    assert ("out", ID, "conflicts_with", "speculative-decoding") in added
    # text verdict for people
    rt = optkg(["place", str(f), "--no-stacks"], home)
    assert rt.returncode == 0
    assert f"optkg place: {ID} (Lookahead decoding (Jacobi))" in rt.stdout
    assert f"[out] {ID} --conflicts_with--> speculative-decoding" in rt.stdout


def test_an_unfilled_template_does_not_block_other_commands(home: Path) -> None:
    # tester defect: after `optkg new`, every command refused the whole catalog until the TODOs were filled
    r = optkg(["new", ID], home)
    assert r.returncode == 0, r.stderr
    rel = f"catalog/techniques/{ID}.yaml"
    warning = (f"optkg: warning: {rel}: unfinished technique template (TODO placeholders left), left out of the "
               f"catalog; fill it in, then `optkg validate {rel}`\n")
    rc = optkg(["check", "examples/qwen3-235b-tp8.yaml", "--format", "json", "--fail-on", "never"], home)
    assert rc.returncode == 0 and rc.stderr == warning
    assert "kv-head-replication" in {f["rule_id"] for f in json.loads(rc.stdout)["findings"]}
    rm = optkg(["matrix", "--format", "json"], home)
    assert rm.returncode == 0 and rm.stderr == warning
    assert ID not in rm.stdout
    # validate (and the CI that runs it) still refuses the unfinished entry
    rv = optkg(["validate"], home)
    assert rv.returncode == 2 and f"{rel}:11:1: error: name: name still holds a template placeholder" in rv.stdout
    # any other problem still blocks: a draft is only a file with TODO placeholders
    (home / "catalog" / "techniques" / "broken.yaml").write_text("id: broken\nname: [\n", encoding="utf-8")
    rb = optkg(["check", "examples/qwen3-235b-tp8.yaml"], home)
    assert rb.returncode == 2 and "catalog/techniques/broken.yaml" in rb.stderr


def test_new_from_neighbour_and_refusals(home: Path) -> None:
    techdir = home / "catalog" / "techniques"
    src = load(techdir / "tensor-parallelism.yaml")
    r = optkg(["new", "sequence-tensor-parallelism-v2", "--from", "tensor-parallelism"], home)
    assert r.returncode == 0, r.stderr
    new = load(techdir / "sequence-tensor-parallelism-v2.yaml")
    assert new["coordinates"] == src["coordinates"] and new["costs"] == src["costs"]
    assert new["id"] == "sequence-tensor-parallelism-v2" and new["aliases"] == []
    rv = json.loads(optkg(["validate", str(techdir / "sequence-tensor-parallelism-v2.yaml"), "--format", "json",
                           "--select", "error"], home).stdout)
    assert sorted(p["path"] for p in rv["problems"]) == ["name", "summary"]  # only the placeholders are left
    # ids are never reused: an existing id or alias is refused
    taken = optkg(["new", "tensor-parallelism"], home)
    assert taken.returncode == 2 and "ids are never reused" in taken.stderr
    alias = (src.get("aliases") or [None])[0]
    if alias and alias == alias.lower() and " " not in alias:
        ra = optkg(["new", alias], home)
        assert ra.returncode == 2 and f"an alias of 'tensor-parallelism'" in ra.stderr
    bad = optkg(["new", "Lookahead Decoding"], home)
    assert bad.returncode == 2 and "lookahead-decoding" in bad.stderr
    unknown = optkg(["new", "abc-def", "--from", "no-such-thing"], home)
    assert unknown.returncode == 2 and "--from: unknown technique 'no-such-thing'" in unknown.stderr
    out = home / "drafts"
    out.mkdir()
    ro = optkg(["new", "abc-def", "-o", str(out)], home)
    assert ro.returncode == 0 and (out / "abc-def.yaml").is_file()
    assert not (techdir / "abc-def.yaml").exists()


# --------------------------------------------------------------------------------------------
# placement numbers on a small catalog, worked by hand

def _small(tmp_path: Path) -> Path:
    entries = [
        # A: inference x L4-L5 x storage  -> cells {inf/L4/sto, inf/L5/sto}; benefits {storage}; costs {network}
        technique("aaa-kv-sharding", ["inference"], ["L4", "L5"], "storage", ["storage"], ["network"]),
        # B: {inference, training} x L5 x storage -> cells {inf/L5/sto, trn/L5/sto}; benefits {storage, scheduling};
        #    costs {network}
        technique("bbb-kv-paging", ["inference", "training"], ["L5"], "storage", ["storage", "scheduling"], ["network"]),
        # C: inference x L6 x scheduling -> shares no cell with anything below
        technique("ccc-router", ["inference"], ["L6"], "scheduling", ["scheduling"], ["network"]),
    ]
    return minimal_catalog(tmp_path, entries)


def test_place_occupied_cells_ranks_replacement_candidates(tmp_path: Path) -> None:
    cat = _small(tmp_path)
    # N: inference x L5 x storage -> one cell {inf/L5/sto}, occupied by A and B; benefits {storage}; costs {network}
    n = technique("nnn-new-kv", ["inference"], ["L5"], "storage", ["storage"], ["network"])
    draft = tmp_path / "nnn-new-kv.yaml"
    dump(draft, n)
    from kg.analyses.place import place_technique
    d = place_technique(draft, cat, stacks=[])
    assert d["verdict"] == "replacement-candidates"
    assert d["cells"] == [{"stage": "inference", "layer": "L5", "dimension": "storage",
                           "occupants": ["aaa-kv-sharding", "bbb-kv-paging"], "annotation": None}]
    assert d["empty_cells"] == []
    # A: cells |{L5}| / |{L4, L5}| = 1/2; benefits {storage}/{storage} = 1; costs 1
    #    score = 0.5 * 0.5 + 0.25 * 1 + 0.25 * 1 = 0.75
    # B: cells |{inf/L5}| / |{inf/L5, trn/L5}| = 1/2; benefits {storage} vs {storage, scheduling} = 1/2; costs 1
    #    score = 0.5 * 0.5 + 0.25 * 0.5 + 0.25 * 1 = 0.625
    got = [(c["id"], c["score"], c["coordinate_overlap"], c["benefit_overlap"], c["cost_overlap"]) for c in d["candidates"]]
    assert got == [("aaa-kv-sharding", 0.75, 0.5, 1.0, 1.0), ("bbb-kv-paging", 0.625, 0.5, 0.5, 1.0)]
    assert "closest: aaa-kv-sharding (0.75), bbb-kv-paging (0.62)" in d["verdict_text"]
    kinds = [i["rule_id"] for i in d["items"]]
    assert kinds.count("place-replacement-candidate") == 2 and "place-new-direction" not in kinds


def test_place_empty_cell_is_a_new_direction(tmp_path: Path) -> None:
    cat = _small(tmp_path)
    # governance x L1 x energy: nobody is there
    n = technique("nnn-power-budget", ["governance"], ["L1"], "energy", ["energy"], ["compute"])
    dump(cat / "techniques" / "nnn-power-budget.yaml", n)
    from kg.analyses.place import place_technique
    d = place_technique(cat / "techniques" / "nnn-power-budget.yaml", stacks=[])
    assert d["verdict"] == "new-direction"
    assert d["empty_cells"] == [["governance", "L1", "energy"]]
    assert d["candidates"] == []
    assert d["verdict_text"] == "new direction: all 1 of its cells are empty"
    [item] = [i for i in d["items"] if i["rule_id"] == "place-new-direction"]
    assert item["message"].endswith("a possible new direction")
    # a cell marked empty on purpose in axes.yaml is noted with its reason
    axes = cat / "axes.yaml"
    axes.write_text(axes.read_text(encoding="utf-8").split("cell_annotations:")[0] +
                    "cell_annotations:\n  - {stage: '*', layer: L1, dimension: energy, status: out-of-scope, "
                    "reason: a test reason}\n", encoding="utf-8")
    d2 = place_technique(cat / "techniques" / "nnn-power-budget.yaml", stacks=[])
    assert d2["cells"][0]["annotation"] == "out-of-scope: a test reason"


def test_place_partly_new_and_couplings_it_adds(tmp_path: Path) -> None:
    cat = _small(tmp_path)
    # C (router) already names the new entry: that coupling dangled before and becomes an edge now
    c = load(cat / "techniques" / "ccc-router.yaml")
    c["couplings"] = [{"kind": "requires", "target": "nnn-kv-tier", "from_dimension": "scheduling", "to_dimension": "storage",
                       "mechanism": "Routes requests to the replica that holds their KV blocks.",
                       "sources": [{"title": "Mooncake paper", "url": "https://arxiv.org/abs/2407.00079"}]}]
    dump(cat / "techniques" / "ccc-router.yaml", c)
    # N: inference x L5-L6 x storage -> inf/L5/sto (A, B there) and inf/L6/sto (empty)
    n = technique("nnn-kv-tier", ["inference"], ["L5", "L6"], "storage", ["storage"], ["network"],
                  couplings=[{"kind": "mitigates", "target": "aaa-kv-sharding", "from_dimension": "storage",
                              "to_dimension": "network", "mechanism": "Keeps hot KV blocks local so fewer shards move.",
                              "sources": [{"title": "Mooncake paper", "url": "https://arxiv.org/abs/2407.00079"}]}])
    draft = tmp_path / "draft" / "nnn-kv-tier.yaml"
    draft.parent.mkdir()
    dump(draft, n)
    from kg.analyses.place import place_technique
    d = place_technique(draft, cat, stacks=[])
    assert d["verdict"] == "partly-new-direction"
    assert d["empty_cells"] == [["inference", "L6", "storage"]]
    assert [(c["direction"], c["from"], c["kind"], c["to"]) for c in d["couplings_added"]] == [
        ("out", "nnn-kv-tier", "mitigates", "aaa-kv-sharding"), ("in", "ccc-router", "requires", "nnn-kv-tier")]
    # A and C were in separate parts of the graph; N joins them
    assert d["bridges"] == [["t:aaa-kv-sharding"], ["t:ccc-router"]]
    # the draft outside the catalog was not copied into it
    assert not (cat / "techniques" / "nnn-kv-tier.yaml").exists()


def test_place_reports_findings_that_change_on_example_stacks(home: Path) -> None:
    """Place DCP as a draft: a stack that names it gains the dcp-invalid-size error; rules naming it now resolve."""
    techdir = home / "catalog" / "techniques"
    draft_dir = home / "drafts"
    draft_dir.mkdir()
    shutil.move(str(techdir / "decode-context-parallelism.yaml"), draft_dir / "decode-context-parallelism.yaml")
    stacks = home / "stacks"
    stacks.mkdir()
    # Qwen3-235B-A22B: 4 KV heads. TP 8 -> each KV head on 8 / 4 = 2 ranks; DCP may be at most 2, so 4 is invalid.
    (stacks / "tp8.yaml").write_text("model: Qwen/Qwen3-235B-A22B\ntechniques:\n  - tensor-parallelism: {tp_size: 8}\n")
    (stacks / "tp8-dcp4.yaml").write_text("model: Qwen/Qwen3-235B-A22B\ntechniques:\n  - tensor-parallelism: {tp_size: 8}\n"
                                          "  - decode-context-parallelism: {dcp_size: 4}\n")
    r = optkg(["place", str(draft_dir / "decode-context-parallelism.yaml"), "--stack", str(stacks), "--format", "json"], home)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    by = {Path(s["stack"]).name: s for s in d["stacks"]}
    assert by["tp8.yaml"]["loads_without_entry"] is True
    assert by["tp8.yaml"]["changes"] == []  # kv-head-replication fires with and without DCP in the catalog
    assert by["tp8-dcp4.yaml"]["loads_without_entry"] is False  # it names DCP, unknown without the entry
    added = {(c["change"], c["rule_id"], c["severity"]) for c in by["tp8-dcp4.yaml"]["changes"]}
    assert ("added", "dcp-invalid-size", "error") in added
    rules = {(x["rule_id"], x["field"]) for x in d["rules"]}
    assert ("dcp-invalid-size", "match") in rules and ("kv-head-replication", "fixes") in rules
    assert all(x["resolved_before"] is False for x in d["rules"])
    # CI formats carry the changed finding at the draft's coordinates line
    gh = optkg(["place", str(draft_dir / "decode-context-parallelism.yaml"), "--stack", str(stacks), "--format", "github",
                "--select", "place-finding-changed"], home)
    assert any(line.startswith("::error file=drafts/decode-context-parallelism.yaml,line=") and "dcp-invalid-size" in line
               for line in gh.stdout.splitlines())
    assert optkg(["place", str(draft_dir / "decode-context-parallelism.yaml"), "--stack", str(stacks),
                  "--fail-on", "error"], home).returncode == 1


def test_place_on_a_broken_entry_shows_the_problems_and_exits_2(home: Path) -> None:
    draft = home / "broken.yaml"
    dump(draft, technique("broken-entry", ["inference"], ["L0"], "storage", ["storage"], ["network"]))
    r = optkg(["place", str(draft)], home, subprocess_=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "broken.yaml:" in r.stdout and "'L0' is not a valid layer" in r.stdout
    md = optkg(["place", str(draft), "--format", "markdown"], home)
    assert md.returncode == 2 and md.stdout.startswith("<!-- optkg:place -->\n### optkg place: `broken-entry`")


def test_place_an_existing_entry_compares_it_with_the_rest(home: Path) -> None:
    techdir = home / "catalog" / "techniques"
    n_entries = len(list(techdir.glob("*.yaml")))
    r = optkg(["place", str(techdir / "tensor-parallelism.yaml"), "--format", "json", "--no-stacks"], home)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["existing"] is True and d["technique"]["in_catalog"] is True
    assert f"compared with the other {n_entries - 1} entries (not with itself)" in d["existing_text"]
    ids = [c["id"] for c in d["candidates"]]
    assert "tensor-parallelism" not in ids and all("tensor-parallelism" not in c["occupants"] for c in d["cells"])
    # expert parallelism: cells {inf, trn} x L4 x compute on both -> 2/2 = 1; benefits {compute, storage} on both -> 1;
    # costs {network, storage} vs {network, scheduling} -> 1/3. score = 0.5 + 0.25 + 0.25/3 = 0.8333; shared tag parallelism
    ep = d["candidates"][0]
    assert (ep["id"], ep["score"], ep["coordinate_overlap"], ep["benefit_overlap"], ep["cost_overlap"], ep["shared_tags"]) == (
        "expert-parallelism", 0.8333, 1.0, 1.0, 0.3333, ["parallelism"])
    # MoE sits in the same cells but is a model architecture (tags architecture, moe): a neighbour, not a candidate
    moe = next(n for n in d["neighbours"] if n["id"] == "mixture-of-experts")
    assert moe["why_not"] == "another kind of technique (tags architecture, moe vs parallelism)"
    assert "mixture-of-experts" not in ids and "semi-structured-sparsity" not in ids
    # 3D parallelism requires TP: a complement
    assert next(n for n in d["neighbours"] if n["id"] == "3d-parallelism")["why_not"] == "complement: one requires the other"
    # data parallelism and HBM capacity declare they replace TP, from other cells
    assert [x["id"] for x in d["declared_elsewhere"]] == ["data-parallelism", "hbm-capacity-upgrade"]
    t = optkg(["place", str(techdir / "tensor-parallelism.yaml"), "--no-stacks"], home).stdout
    assert "did not resolve before" not in t
    assert "rules that name it (each resolves to this entry; without it they would name nothing):" in t
    assert "couplings it contributes to the graph:" in t
    assert "neighbours in its cells, not alternatives: mixture-of-experts (another kind of technique" in t


def test_place_candidates_need_a_shared_cell_and_kind(tmp_path: Path) -> None:
    # N: inference x L5 x storage, tags [kv-cache]. A and B share its cell; A is tagged kv-cache, B scheduling;
    # C requires N (a complement) in the same cell; D declares it replaces N from another cell.
    req = {"kind": "requires", "target": "nnn-kv", "from_dimension": "storage", "to_dimension": "storage",
           "mechanism": "Needs the new KV layer underneath it.", "sources": [{"title": "t", "url": "https://arxiv.org/abs/2407.00079"}]}
    rpl = {**req, "kind": "replaces", "mechanism": "Does the same job one layer up."}
    entries = [
        technique("aaa-kv", ["inference"], ["L5"], "storage", ["storage"], ["network"], tags=["kv-cache", "serving"]),
        technique("bbb-sched", ["inference"], ["L5"], "storage", ["storage"], ["network"], tags=["scheduling", "serving"]),
        technique("ccc-needs", ["inference"], ["L5"], "storage", ["storage"], ["network"], tags=["kv-cache"], couplings=[req]),
        technique("ddd-other", ["inference"], ["L6"], "scheduling", ["scheduling"], ["network"], tags=["kv-cache"], couplings=[rpl]),
    ]
    cat = minimal_catalog(tmp_path, entries)
    draft = tmp_path / "nnn-kv.yaml"
    dump(draft, technique("nnn-kv", ["inference"], ["L5"], "storage", ["storage"], ["network"], tags=["kv-cache", "serving"]))
    from kg.analyses.place import place_technique
    d = place_technique(draft, cat, stacks=[])
    # A: same single cell (1), same benefit and cost dimensions (1, 1): 0.5 + 0.25 + 0.25 = 1.0; tag kv-cache
    assert [(c["id"], c["score"], c["shared_tags"]) for c in d["candidates"]] == [("aaa-kv", 1.0, ["kv-cache"])]
    # 'serving' is stage-like and does not make B the same kind
    assert [(n["id"], n["why_not"]) for n in d["neighbours"]] == [
        ("bbb-sched", "another kind of technique (tags scheduling vs kv-cache)"),
        ("ccc-needs", "complement: one requires the other")]
    assert [x["id"] for x in d["declared_elsewhere"]] == ["ddd-other"]
    assert d["existing"] is False and d["existing_text"] is None
    assert d["scoring"].startswith("a replacement candidate shares a cell (same stage, layer and primary dimension)")


def test_place_reads_every_stack_form_check_reads(home: Path) -> None:
    """A training stack (framework: + training:) and a DeepSpeed JSON are re-checked, not refused as before with
    "unknown field 'training'": the Megatron example holds TP (TP 8 x PP 4 x DP 16); ZeRO-2 with a DeepSpeed pipeline
    engine fires deepspeed-zero-with-pipeline-engine, which names zero-2."""
    repo = Path(__file__).resolve().parents[1]
    techdir = home / "catalog" / "techniques"
    r = optkg(["place", str(techdir / "zero-2.yaml"), "--format", "json",
               "--stack", str(repo / "examples/llama-3.1-70b-megatron-train.yaml"),
               "--stack", str(repo / "tests/fixtures/training_cases/zero2-pp-stack.yaml")], home)
    assert r.returncode == 0, r.stderr
    by = {Path(s["stack"]).name: s for s in json.loads(r.stdout)["stacks"]}
    assert {s["status"] for s in by.values()} == {"checked"} and {s["kind"] for s in by.values()} == {"training"}
    assert by["zero2-pp-stack.yaml"]["uses_entry"] is True
    assert by["llama-3.1-70b-megatron-train.yaml"]["uses_entry"] is False  # Megatron's distributed optimizer, not ZeRO-2
    t = optkg(["place", str(techdir / "tensor-parallelism.yaml"),
               "--stack", str(repo / "examples/llama-3.1-70b-megatron-train.yaml")], home).stdout
    assert "llama-3.1-70b-megatron-train.yaml (training job; holds the entry)" in t
    assert max(len(line) for line in t.splitlines()) <= 100
