"""`optkg validate` teaches: every problem in one pass, each with file:line:column, field, found, valid values, hint.

All tests work on a temporary copy of the shipped catalog (tests/catalog_copy.py), never on the
repository, so they hold whatever the catalog contains.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from catalog_copy import copy_catalog, dump, load, optkg, technique

LINE_RE = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): (?P<rest>.*)$")


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line number of the nth line containing ``needle``."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    assert len(hits) >= nth, f"{needle!r} not in the file"
    return hits[nth - 1]


def _problems(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        m = LINE_RE.match(line)
        if m:
            rest = m["rest"]
            code = rest[rest.rindex("[") + 1:-1]
            path = rest.split(": ", 1)[0] if ": " in rest else ""
            out.append({"file": m["file"], "line": int(m["line"]), "col": int(m["col"]), "sev": m["sev"],
                        "path": path, "code": code, "text": line})
    return out


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return copy_catalog(tmp_path / "home")


def _first_with_aliases(cat: Path) -> tuple[str, str, str]:
    """(id, first alias, name) of the first technique (sorted) that has aliases."""
    for f in sorted((cat / "techniques").glob("*.yaml")):
        d = load(f)
        if d.get("aliases"):
            return d["id"], d["aliases"][0], d["name"]
    pytest.skip("no technique with aliases in the catalog")


def test_ten_ways_broken_in_one_run(home: Path) -> None:
    cat = home / "catalog"
    owner, dup_alias, _ = _first_with_aliases(cat)
    other_name = load(cat / "techniques" / "tensor-parallelism.yaml")["name"]
    # (k) the other side of a contradiction: tensor-parallelism conflicts_with the new entry, unconditionally
    tp_file = cat / "techniques" / "tensor-parallelism.yaml"
    tp = load(tp_file)
    tp.setdefault("couplings", []).append({
        "kind": "conflicts_with", "target": "speculative-jacobi-decoding", "from_dimension": "compute",
        "to_dimension": "compute", "mechanism": "A test coupling that contradicts the new entry's requires.",
        "sources": [{"title": "Megatron-LM paper", "url": "https://arxiv.org/abs/1909.08053"}]})
    dump(tp_file, tp)
    src = "https://nvidia.github.io/TensorRT-LLM/advanced/speculative-decoding.html"
    text = f"""\
id: speculative-jacobi-decoding
name: {other_name.upper()}
aliases: [{dup_alias}]
sumary: Guesses several future tokens by Jacobi iteration and verifies them in one forward pass.
status: deprecated
coordinates:
  stages: inference
  layers: [L8]
  dimension: compute
benefits:
  - dimension: scheduling
    what: fewer sequential decode steps per generated token
costs:
  - what: extra FLOPs per step for the lookahead branch
couplings:
  - kind: conflicts_with
    target: no-such-technique
    from_dimension: compute
    to_dimension: compute
    mechanism: Both want to own the verification step of the engine.
    sources: [{{title: TensorRT-LLM speculative decoding, url: "{src}"}}]
  - kind: mitigates
    target: speculative-jacobi-decoding
    from_dimension: compute
    to_dimension: compute
    mechanism: A technique that claims to mitigate itself.
    sources: [{{title: TensorRT-LLM speculative decoding, url: "{src}"}}]
  - kind: requires
    target: tensor-parallelism
    from_dimension: compute
    to_dimension: compute
    mechanism: Requires tensor parallelism, which the other side says conflicts.
    sources: [{{title: TensorRT-LLM speculative decoding, url: "{src}"}}]
references:
  - title: Break the Sequential Dependency of LLM Inference Using Lookahead Decoding
    url: arxiv.org/abs/2402.02057
    kind: paper
    kind: doc
"""
    f = cat / "techniques" / "jacobi-decoding.yaml"
    f.write_text(text, encoding="utf-8")
    r = optkg(["validate", str(f)], home, subprocess_=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert r.stderr == ""
    probs = _problems(r.stdout)
    # every problem is reported on the file we asked about, and names line and field
    assert probs and all(p["file"].endswith("jacobi-decoding.yaml") for p in probs)
    expected = {  # way -> (check code, field path, line)
        "a unknown field (typo)": ("schema-unknown-field", "sumary", _line_of(text, "sumary:")),
        "b layer outside the axis": ("schema-enum", "coordinates.layers[0]", _line_of(text, "[L8]")),
        "c cost without a dimension": ("schema-required", "costs[0].dimension", _line_of(text, "- what: extra FLOPs")),
        "d reference without a URL": ("schema-format", "references[0].url", _line_of(text, "url: arxiv.org")),
        "e dangling coupling target": ("dangling-target", "couplings[0].target", _line_of(text, "no-such-technique")),
        "f self-coupling": ("self-coupling", "couplings[1].target", _line_of(text, "target: speculative-jacobi")),
        "g alias used by another entry": ("duplicate-alias", "aliases[0]", _line_of(text, "aliases:")),
        "h deprecated without replaced_by": ("schema-required", "replaced_by", _line_of(text, "status: deprecated")),
        "i name used by another entry": ("duplicate-name", "name", _line_of(text, "name:")),
        "j id differs from the file name": ("id-filename", "id", 1),
        "k contradicting couplings": ("contradicting-couplings", "couplings[2].kind", _line_of(text, "- kind: requires")),
        "l stages not a list": ("schema-type", "coordinates.stages", _line_of(text, "stages: inference")),
        "m duplicate YAML key": ("duplicate-key", "references[0].kind", _line_of(text, "kind: doc")),
    }
    got = {(p["code"], p["path"], p["line"]) for p in probs}
    missing = {k: v for k, v in expected.items() if v not in got}
    assert not missing, f"missing {missing}\n--- output ---\n{r.stdout}"
    assert len(expected) >= 10
    # teaching details: valid values with descriptions, did-you-mean, hints
    out = r.stdout
    assert "hint: did you mean 'summary'?" in out
    assert re.search(r"- L7: Business & application \(业务与应用层\): ", out)  # enum value with its description
    assert "- compute: Compute" in out  # the missing dimension lists the dimensions
    assert "hint: write it as a list: stages: [inference]" in out
    assert "a URL must start with http:// or https://" in out
    assert f"'{owner}'" in out  # the duplicate alias names the other owner
    assert "tensor-parallelism' conflicts_with 'speculative-jacobi-decoding'" in out
    assert "name its successor: replaced_by: <id>" in out
    # JSON carries the same problems with found/expected/valid values
    rj = optkg(["validate", str(f), "--format", "json"], home)
    d = json.loads(rj.stdout)
    assert d["schema_version"] == "1.0" and d["kind"] == "validate"
    layer = next(p for p in d["problems"] if p["path"] == "coordinates.layers[0]")
    assert layer["found"] == "L8" and [v["value"] for v in layer["valid_values"]] == [f"L{i}" for i in range(1, 8)]
    assert all(v["description"] for v in layer["valid_values"])
    assert d["summary"]["errors"] == len(d["problems"]) == len(probs)


def test_only_named_files_are_reported_but_cross_file_checks_see_everything(home: Path) -> None:
    cat = home / "catalog"
    owner, dup_alias, _ = _first_with_aliases(cat)
    a = technique("aaa-new-entry", ["inference"], ["L5"], "scheduling", ["scheduling"], ["compute"], aliases=[dup_alias])
    b = technique("bbb-broken-entry", ["inference"], ["L9"], "scheduling", ["scheduling"], ["compute"])
    dump(cat / "techniques" / "aaa-new-entry.yaml", a)
    dump(cat / "techniques" / "bbb-broken-entry.yaml", b)
    r = optkg(["validate", "catalog/techniques/aaa-new-entry.yaml"], home)
    probs = _problems(r.stdout)
    # the clash with the owner's alias is found (the owner's file is read), but reported only on the named file
    assert [(p["file"], p["code"]) for p in probs] == [("catalog/techniques/aaa-new-entry.yaml", "duplicate-alias")]
    assert r.returncode == 2
    r_all = optkg(["validate", "--format", "json"], home)
    files = {(Path(p["file"]).name, p["code"]) for p in json.loads(r_all.stdout)["problems"]}
    assert ("bbb-broken-entry.yaml", "schema-enum") in files
    assert (f"{owner}.yaml", "duplicate-alias") in files  # reported on both sides in a full run


def test_ids_never_die_renamed_id_resolves_with_a_note(home: Path, tmp_path: Path) -> None:
    cat = home / "catalog"
    # rename decode-context-parallelism -> context-parallel-decode; keep the old id as an alias
    old, new = "decode-context-parallelism", "context-parallel-decode"
    referrers = sorted(f.stem for f in (cat / "techniques").glob("*.yaml")
                       if any(c.get("target") == old for c in load(f).get("couplings") or []))
    assert referrers, "expected other techniques to couple with DCP"
    d = load(cat / "techniques" / f"{old}.yaml")
    (cat / "techniques" / f"{old}.yaml").unlink()
    d["id"] = new
    d["aliases"] = [old] + list(d.get("aliases") or [])
    dump(cat / "techniques" / f"{new}.yaml", d)
    r = optkg(["validate", "--format", "json", "--select", "alias-reference,error"], home)
    probs = json.loads(r.stdout)["problems"]
    assert [p for p in probs if p["severity"] == "error"] == []
    warned = sorted(Path(p["file"]).stem for p in probs if p["code"] == "alias-reference")
    assert warned == sorted(r for r in referrers)
    assert all(p["expected"] == new and p["hint"] == f"write target: {new}" for p in probs)
    # a stack naming the old id still loads, and says the old id resolves to the new one
    stack = home / "stack.yaml"
    stack.write_text(f"model: Qwen/Qwen3-235B-A22B\ntechniques:\n  - tensor-parallelism: {{tp_size: 8}}\n"
                     f"  - {old}: {{dcp_size: 2}}\n", encoding="utf-8")
    rc = optkg(["check", str(stack), "--format", "json"], home)
    assert rc.returncode == 0, rc.stderr
    rep = json.loads(rc.stdout)
    assert new in rep["stack"]["techniques"]
    assert any(old in n and new in n for n in rep["notes"]), rep["notes"]
    # the coupling graph keeps the edges that name the old id
    from kg.knowledge.catalog import load_catalog
    from kg.knowledge.graph import build_graph
    catalog, problems = load_catalog(cat, use_cache=False)
    assert problems == []
    g = build_graph(catalog)
    assert all(g.has_edge(f"t:{r}", f"t:{new}") for r in referrers)
    assert catalog.resolve_note(old) == f"'{old}' is an old id or alias of '{new}'; it still resolves, but write '{new}'"


def test_deleted_id_must_live_on(home: Path) -> None:
    """--changed-since: a deleted technique file whose id no longer resolves is an error (ids never die)."""
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q", "."], cwd=home, check=True)
    subprocess.run(git + ["add", "-A"], cwd=home, check=True)
    subprocess.run(git + ["commit", "-qm", "base"], cwd=home, check=True)
    victim = "sliding-window-attention"
    (home / "catalog" / "techniques" / f"{victim}.yaml").unlink()
    new = technique("zzz-added-entry", ["inference"], ["L5"], "scheduling", ["scheduling"], ["compute"])
    dump(home / "catalog" / "techniques" / "zzz-added-entry.yaml", new)
    r = optkg(["validate", "--changed-since", "HEAD", "--format", "json"], home)
    d = json.loads(r.stdout)
    removed = [p for p in d["problems"] if p["code"] == "removed-id"]
    assert len(removed) == 1 and removed[0]["found"] == victim
    assert removed[0]["file"].endswith(f"{victim}.yaml")
    users = sorted(f.stem for f in (home / "catalog" / "techniques").glob("*.yaml")
                   if any(c.get("target") == victim for c in load(f).get("couplings") or []))
    if users:
        assert "still named by: " + ", ".join(users) in removed[0]["message"]
    # only the changed files are reported on: the added entry is clean, the rest of the catalog is not listed
    assert {Path(p["file"]).stem for p in d["problems"]} <= {victim}
    assert r.returncode == 2
    # keeping the id as an alias of the successor satisfies the check
    succ = load(home / "catalog" / "techniques" / "zzz-added-entry.yaml")
    succ["aliases"] = [victim]
    dump(home / "catalog" / "techniques" / "zzz-added-entry.yaml", succ)
    d2 = json.loads(optkg(["validate", "--changed-since", "HEAD", "--format", "json"], home).stdout)
    assert [p for p in d2["problems"] if p["code"] == "removed-id"] == []


def test_deprecated_lifecycle_checks(home: Path) -> None:
    cat = home / "catalog"
    old = technique("old-scheduler", ["inference"], ["L5"], "scheduling", ["scheduling"], ["compute"],
                    status="deprecated", replaced_by="continuous-batching-v9")
    user = technique("uses-old-scheduler", ["inference"], ["L6"], "scheduling", ["scheduling"], ["compute"],
                     couplings=[{"kind": "requires", "target": "old-scheduler", "from_dimension": "scheduling",
                                 "to_dimension": "scheduling", "mechanism": "Needs the old scheduler to batch requests.",
                                 "sources": [{"title": "Orca paper", "url": "https://www.usenix.org/conference/osdi22/presentation/yu"}]}])
    dump(cat / "techniques" / "old-scheduler.yaml", old)
    dump(cat / "techniques" / "uses-old-scheduler.yaml", user)
    d = json.loads(optkg(["validate", "catalog/techniques/old-scheduler.yaml", "catalog/techniques/uses-old-scheduler.yaml",
                          "--format", "json"], home).stdout)
    codes = sorted((Path(p["file"]).stem, p["code"], p["severity"]) for p in d["problems"])
    assert codes == [("old-scheduler", "dangling-replaced-by", "error"),
                     ("uses-old-scheduler", "deprecated-target", "warning")]


def test_select_ignore_baseline_and_fail_on(home: Path) -> None:
    cat = home / "catalog"
    # a coupling that names DCP by its alias 'dcp' is a warning (alias-reference), not an error
    dcp_aliases = load(cat / "techniques" / "decode-context-parallelism.yaml").get("aliases") or []
    assert dcp_aliases
    e = technique("kv-aware-router", ["inference"], ["L6"], "scheduling", ["scheduling"], ["network"],
                  couplings=[{"kind": "requires", "target": dcp_aliases[0], "from_dimension": "scheduling",
                              "to_dimension": "storage", "mechanism": "Routes by the KV shards that DCP spreads over ranks.",
                              "sources": [{"title": "vLLM context parallel deployment",
                                           "url": "https://docs.vllm.ai/en/latest/serving/context_parallel_deployment.html"}]}])
    f = cat / "techniques" / "kv-aware-router.yaml"
    dump(f, e)
    rel = "catalog/techniques/kv-aware-router.yaml"
    r = optkg(["validate", rel], home)
    assert r.returncode == 1, r.stdout  # a warning at the default --fail-on warning
    assert "[alias-reference]" in r.stdout
    assert optkg(["validate", rel, "--fail-on", "error"], home).returncode == 0
    ri = optkg(["validate", rel, "--ignore", "alias-reference", "--format", "json"], home)
    assert ri.returncode == 0 and json.loads(ri.stdout)["suppressed"] == 1
    assert optkg(["validate", rel, "--ignore", "aliases"], home).returncode == 0  # by tag
    assert optkg(["validate", rel, "--select", "error"], home).returncode == 0  # by severity
    base = home / "baseline.json"
    assert optkg(["validate", rel, "--write-baseline", str(base)], home).returncode == 1
    assert len(json.loads(base.read_text())["fingerprints"]) == 1
    rb = optkg(["validate", rel, "--baseline", str(base), "--format", "json"], home)
    assert rb.returncode == 0 and json.loads(rb.stdout)["suppressed"] == 1
    # the baseline survives the problem moving to another line
    text = f.read_text()
    f.write_text("# a comment line added above\n" + text)
    assert optkg(["validate", rel, "--baseline", str(base)], home).returncode == 0
    # an error is an input error: exit 2 whatever --fail-on says
    e["coordinates"]["layers"] = ["L0"]
    dump(f, e)
    assert optkg(["validate", rel, "--fail-on", "never"], home).returncode == 2


def test_yaml_errors_are_problems_with_lines_and_the_run_goes_on(home: Path) -> None:
    cat = home / "catalog"
    bad = cat / "techniques" / "tabbed.yaml"
    bad.write_text("id: tabbed\nname: Tabbed\ncoordinates:\n\tstages: [inference]\n", encoding="utf-8")
    worse = cat / "techniques" / "unclosed.yaml"
    worse.write_text("id: unclosed\nname: [Unclosed\nsummary: x\n", encoding="utf-8")
    r = optkg(["validate", str(bad), str(worse)], home)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    probs = _problems(r.stdout)
    assert {(Path(p["file"]).name, p["code"]) for p in probs} == {("tabbed.yaml", "yaml"), ("unclosed.yaml", "yaml")}
    tab = next(p for p in probs if p["file"].endswith("tabbed.yaml"))
    assert tab["line"] == 4  # the tab is on line 4
    assert "YAML indents with spaces, not tabs" in r.stdout


def test_a_file_outside_the_catalog_is_still_checked(home: Path, tmp_path: Path) -> None:
    # tester defect: a YAML file outside catalog/techniques got only `outside-catalog`, not its YAML error
    bad = tmp_path / "drafts" / "unclosed.yaml"
    bad.parent.mkdir()
    bad.write_text("id: unclosed\nname: [Unclosed\nsummary: x\n", encoding="utf-8")
    r = optkg(["validate", str(bad), "--format", "json"], home)
    assert r.returncode == 2
    probs = json.loads(r.stdout)["problems"]
    # the flow sequence opened on line 2 is still open when line 3 starts a new key: PyYAML reports line 3
    assert [(p["code"], p["line"]) for p in probs] == [("outside-catalog", 1), ("yaml", 3)]
    # a well-formed entry outside the catalog gets its schema problems too, not only the location
    ok = tmp_path / "drafts" / "almost.yaml"
    ok.write_text("id: almost\nname: Almost\nsummary: too short\n", encoding="utf-8")
    r2 = optkg(["validate", str(ok), "--format", "json"], home)
    codes = [p["code"] for p in json.loads(r2.stdout)["problems"]]
    assert r2.returncode == 2 and codes[0] == "outside-catalog" and len(codes) > 1 and "yaml" not in codes


def test_duplicate_property_id_is_reported(home: Path) -> None:
    props = home / "catalog" / "properties.yaml"
    text = props.read_text(encoding="utf-8")
    text += ("  - id: num_attention_heads\n    kind: model\n    name: again\n    dimension: compute\n"
             "    description: declared a second time\n")
    props.write_text(text, encoding="utf-8")
    r = optkg(["validate", "--format", "json", "--select", "properties"], home)
    d = json.loads(r.stdout)
    assert r.returncode == 2
    [p] = d["problems"]
    assert p["found"] == "num_attention_heads" and p["line"] == _line_of(text, "- id: num_attention_heads", 2)
    assert f"first on line {_line_of(text, '- id: num_attention_heads')}" in p["message"]


def test_unknown_input_is_one_line_exit_2(home: Path) -> None:
    r = optkg(["validate", "catalog/techniques/does-not-exist.yaml"], home, subprocess_=True)
    assert r.returncode == 2
    assert r.stderr.strip() == "optkg: error: catalog/techniques/does-not-exist.yaml: file not found"
    r2 = optkg(["validate", "--changed-since", "no-such-ref"], home)  # not a git repository
    assert r2.returncode == 2 and r2.stderr.startswith("optkg: error: --changed-since: ") and "\n" == r2.stderr[-1]
    assert r2.stderr.count("\n") == 1


def test_shipped_catalog_has_no_errors(tmp_path: Path) -> None:
    """Dogfood: the catalog in the repository passes the checks users run (warnings aside)."""
    home = copy_catalog(tmp_path / "h")
    r = optkg(["validate", "--format", "json"], home)
    d = json.loads(r.stdout)
    errors = [f"{p['file']}:{p['line']}: {p['path']}: {p['message']} [{p['code']}]" for p in d["problems"]
              if p["severity"] == "error"]
    assert errors == []
