"""The HTML explorer (``optkg export site``) and the HTML check report, without a browser: what the
pages contain, escaping of hostile catalog text on every page, deterministic bytes, output safety.
The browser drives the same pages in tests/test_site_browser.py."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser

import pytest

from export_helpers import HOSTILE, REPO
from kg.core.errors import OptkgError
from kg.knowledge.catalog import load_catalog
from kg.output.site import build_site, check_site, write_site
from kg.output.site.html import data_island, esc, safe_url
from kg.output.site.report import check_site_url, render_check_html

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the model and the site (module fixtures) are built once
pytestmark = pytest.mark.xdist_group("site")


@pytest.fixture(scope="module")
def model(catalog):
    from kg.output.site.model import site_model
    return site_model(catalog)


@pytest.fixture(scope="module")
def site(catalog, model):
    return build_site(catalog, model=model)


def _digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name, data in sorted(files.items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


class _Page(HTMLParser):
    """Elements, attributes and text of a page, as a browser's parser would see them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[dict[str, str | None]] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self.islands: dict[str, str] = {}
        self._island: str | None = None
        self.tags: list[str] = []
        self.attrs: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.attrs.update(k for k, _ in attrs)
        if tag == "script":
            self.scripts.append(a)
            if a.get("type") == "application/json":
                self._island = a.get("id")
                self.islands[self._island] = ""
        for k in ("href", "src"):
            if a.get(k):
                self.hrefs.append(a[k])

    def handle_endtag(self, tag):
        if tag == "script":
            self._island = None

    def handle_data(self, data):
        if self._island is not None:
            self.islands[self._island] += data
        else:
            self.text.append(data)


def _parse(data: bytes) -> _Page:
    p = _Page()
    p.feed(data.decode("utf-8"))
    return p


# ---------------------------------------------------------------------------------------------
# contents

def test_site_has_every_page(site, catalog):
    names = set(site)
    assert {"index.html", "techniques.html", "graph.html", "matrix.html", "site.css", "map.js", "graph.js",
            "cytoscape.min.js", "cytoscape-LICENSE.txt"} <= names
    assert {f"technique-{t}.html" for t in catalog.techniques} <= names
    assert {"matrix-vllm.html", "matrix-sglang.html", "matrix-trtllm.html", "matrix-lmdeploy.html"} <= names
    assert b"Permission is hereby granted, free of charge" in site["cytoscape-LICENSE.txt"]  # MIT, beside the copy
    assert site["cytoscape.min.js"].startswith(b"/**\n * Copyright (c) 2016-2026, The Cytoscape Consortium.")


def test_no_page_loads_anything_from_the_network(site):
    kinds = ["index.html", "techniques.html", "graph.html", "matrix.html", "matrix-vllm.html",
             sorted(n for n in site if n.startswith("matrix-vllm-"))[0], "technique-tensor-parallelism.html",
             "technique-decode-context-parallelism.html"]
    for name in kinds:
        data = site[name]
        p = _parse(data)
        for s in p.scripts:
            assert s.get("type") == "application/json" or s.get("src") in ("map.js", "graph.js", "matrix.js",
                                                                            "cytoscape.min.js"), (name, s)
        for h in p.hrefs:  # local pages and stylesheets, or http(s) links to sources a reader may follow
            assert not h.startswith(("//", "javascript:", "data:")), (name, h)
        assert b"<link rel=\"stylesheet\" href=\"site.css\">" in data


def test_map_lists_every_technique_once_in_the_combined_panel(site, catalog):
    html = site["index.html"].decode()
    combined = html.split('data-stage="combined"')[1].split('<section class="panel"')[0]
    ids = set(re.findall(r'<li data-t="([a-z0-9-]+)"', combined))
    assert ids == set(catalog.techniques)
    # a cell lists the full names for the tooltip, and each chip carries its full name
    assert 'data-names="Tensor parallelism' in combined or "\nTensor parallelism" in combined
    assert '<abbr title="Tensor parallelism">TP</abbr>' in combined
    # the abbreviations the issue named are explained
    for short in ("APC", "CLA", "PCP", "KD", "ZB / interleaved PP", "GDR"):
        assert f'<dt><abbr title="' in html and f'">{short}</abbr></dt>' in html, short


def test_map_marks_gaps_with_their_rank(site):
    """exports/gaps.md (optkg gaps) ranks a cell first (today: training, L4, scheduling); that stage's panel
    shows "gap #1" in it."""
    gaps_md = (REPO / "exports" / "gaps.md").read_text()
    first = re.search(r"^\| 1 \| (\w+) \| (L\d) \| (\w+) \|", gaps_md, re.M)
    assert first, gaps_md[:600]
    stage, layer, dim = first.groups()
    html = site["index.html"].decode()
    panel = html.split(f'data-stage="{stage}"')[1].split('<section class="panel"')[0]
    row = panel.split(f'<tr data-layer="{layer}">')[1].split("</tr>")[0]
    cell = re.search(rf'<td class="cell gap"[^>]*data-dim="{dim}"[^>]*data-gap="(\d+)"', row)
    assert cell and cell.group(1) == "1"
    assert '<span class="gapmark">gap #1</span>' in row


def test_engine_availability_from_the_flag_tables(catalog):
    """vLLM's --tensor-parallel-size has since 0.5.0 (catalog/engines/vllm.yaml:80); -dcp since 0.10.2 (:89)."""
    from kg.output.site.model import engine_availability
    av = engine_availability(catalog)
    rels = av["vllm"]["releases"]
    tp = av["vllm"]["techniques"]["tensor-parallelism"]
    assert rels[tp[0]] == "0.5.0" and rels[tp[-1]] == rels[-1] and len(tp) == len(rels) - rels.index("0.5.0")
    dcp = av["vllm"]["techniques"]["decode-context-parallelism"]
    assert rels[dcp[0]] == "0.10.2" and len(dcp) == len(rels) - rels.index("0.10.2")
    assert av["lmdeploy"]["releases"] == [] and "tensor-parallelism" in av["lmdeploy"]["techniques"]


def test_release_pages_hold_the_matrix_of_each_of_their_releases(catalog, model):
    """A page stands for a run of releases: compatibility_matrix at any release of the run gives its cells."""
    from kg.analyses.matrix import compatibility_matrix
    from kg.engine.rules import load_ruleset
    rules = load_ruleset("check")
    m = model
    pages = [p for p in m["matrices"] if p["engine"] == "vllm" and p["releases"]]
    assert sum(len(p["releases"]) for p in pages) == len(m["engines"]["vllm"]["releases"])
    assert [r for p in pages for r in p["releases"]] == m["engines"]["vllm"]["releases"]  # in order, each once
    for p in (pages[0], pages[len(pages) // 2], pages[-1]):
        for rel in (p["releases"][0], p["releases"][-1]):
            cells = [(c["a"], c["b"], c["mark"], c["condition"], c["rule"])
                     for c in compatibility_matrix(catalog, rules, "vllm", rel)["cells"]]
            assert cells == [(c["a"], c["b"], c["mark"], c["condition"], c["rule"]) for c in p["cells"]], (p["slug"], rel)
    # consecutive pages differ (equal neighbours are merged into one page)
    for x, y in zip(pages, pages[1:]):
        assert x["cells"] != y["cells"]


def test_technique_page_shows_couplings_rules_and_costs(site):
    html = site["technique-tensor-parallelism.html"].decode()
    out = html.split('id="couplings-out"')[1].split("</section>")[0]
    assert "<code>tp_size &gt; num_key_value_heads</code>" in out and "property KV-head replication factor" in out
    inn = html.split('id="couplings-in"')[1].split("</section>")[0]
    assert 'href="technique-decode-context-parallelism.html"' in html
    assert 'href="technique-custom-allreduce.html"' in inn
    rules = html.split('id="rules"')[1].split("</section>")[0]
    assert "kv-head-replication" in rules and re.search(r"rules/kv_parallel\.yaml:\d+", rules)
    assert "two all-reduces per transformer layer on the critical path" in html  # network cost
    assert 'href="graph.html#focus=t:tensor-parallelism"' in html


# ---------------------------------------------------------------------------------------------
# escaping

EVIL = '<script>alert("x")</script> </script><img src=x onerror=alert(1)> \'q\' & "dq"'
EVIL_URL = 'https://example.org/"onmouseover="alert(1)'



def _hostile_catalog(tmp_path):
    root = tmp_path / "hostile"
    shutil.copytree(HOSTILE, root)
    (root / "techniques" / "script-tech.yaml").write_text(textwrap.dedent(f"""\
        id: script-tech
        name: {json.dumps(EVIL)}
        short_name: {json.dumps("</script><b>S</b>")}
        summary: {json.dumps("summary " + EVIL)}
        status: stable
        tags: [hostile]
        aliases: [{json.dumps("alias</script>")}]
        coordinates: {{stages: [serve], layers: [L2], dimension: compute}}
        benefits: [{{dimension: compute, what: {json.dumps("benefit " + EVIL)}}}]
        costs: [{{dimension: storage, what: {json.dumps("cost " + EVIL)}, who: {json.dumps("who " + EVIL)}}}]
        parameters:
          - {{name: tp_size, type: integer, minimum: 1, description: {json.dumps("param " + EVIL)}}}
        couplings:
          - kind: requires
            target: quote-tech
            from_dimension: compute
            to_dimension: compute
            condition: "tp_size > 1"
            mechanism: {json.dumps("mechanism " + EVIL)}
            sources: [{{title: {json.dumps("source " + EVIL)}, url: {json.dumps(EVIL_URL)}}}]
        references: [{{title: {json.dumps("ref " + EVIL)}, url: "https://example.org/</script>"}}]
        """), encoding="utf-8")
    cat, problems = load_catalog(root, use_cache=False)
    assert not problems, [p.one_line() for p in problems]
    return cat


def test_hostile_names_are_text_on_every_page(tmp_path):
    cat = _hostile_catalog(tmp_path)
    files = build_site(cat)
    pages = {n: d for n, d in files.items() if n.endswith(".html")}
    assert len(pages) > 10
    for name, data in pages.items():
        text = data.decode("utf-8")
        p = _parse(data)
        # no element came from catalog text: the only scripts are ours, no <img>, no javascript: link
        assert "img" not in p.tags and "b" not in p.tags, name
        assert not [a for a in p.attrs if a.startswith("on")], name  # no event handler attribute
        for s in p.scripts:
            assert s.get("type") == "application/json" or s.get("src") in ("map.js", "graph.js", "matrix.js",
                                                                            "cytoscape.min.js"), (name, s)
        assert "javascript:" not in " ".join(p.hrefs), name
        assert "<script>alert" not in text and "</script><b>" not in text and "onerror=alert(1)>" not in text
        for island, raw in p.islands.items():  # the JSON islands parse back to the exact strings
            assert "</" not in raw, (name, island)
            json.loads(raw)
    page = _parse(pages["technique-script-tech.html"])
    shown = "".join(page.text)
    for piece in (EVIL, "summary " + EVIL, "mechanism " + EVIL, "source " + EVIL, "param " + EVIL,
                  "cost " + EVIL, "who " + EVIL, "benefit " + EVIL, "alias</script>"):
        assert piece in shown, piece
    assert f'href="{esc(EVIL_URL)}"' in pages["technique-script-tech.html"].decode()  # quotes stay in the value
    island = json.loads(_parse(pages["index.html"]).islands["map-data"])
    assert island["techniques"]["script-tech"]["n"] == EVIL
    graph = json.loads(_parse(pages["graph.html"]).islands["graph-data"])
    assert {n["name"] for n in graph["nodes"]} >= {EVIL}
    assert EVIL in "".join(_parse(pages["techniques.html"]).text)


def test_escape_helpers_by_hand():
    assert esc('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert data_island("d", {"k": "</script>&\u2028"}) == \
        '<script type="application/json" id="d">{"k":"\\u003c/script\\u003e\\u0026\\u2028"}</script>'
    assert safe_url("https://docs.vllm.ai/x") == "https://docs.vllm.ai/x"
    assert safe_url("javascript:alert(1)") is None and safe_url("data:text/html,x") is None
    assert safe_url("https://a b") is None and safe_url("//evil.example") is None


def test_check_report_escapes_hostile_findings():
    d = {"stack": {"name": EVIL, "model": EVIL, "attention": "gqa", "engine": "vllm", "engine_version": "0.33.0",
                   "hardware": "H200", "gpu_count": 8, "techniques": {"tensor-parallelism": {"tp_size": EVIL}}},
         "findings": [{"rule_id": "r1", "severity": "error", "title": EVIL, "message": EVIL, "mechanism": EVIL,
                       "fix": EVIL, "fixes": [{"technique": "decode-context-parallelism"}],
                       "techniques": ["tensor-parallelism"], "numbers": {"x": EVIL},
                       "sources": [{"title": EVIL, "url": "javascript:alert(1)"}], "rule_file": "rules/x.yaml",
                       "rule_line": 3}],
         "not_evaluable": [{"rule_id": "r2", "missing": [EVIL], "needs": [EVIL], "reason": EVIL}],
         "notes": [EVIL], "in_effect": [{"message": EVIL, "coupling": EVIL}], "ignored_flags": [EVIL],
         "derived": {}, "effective_config": [{"setting": "s", "value": EVIL, "source": "given", "why": EVIL}],
         "outcomes": {"fired": 1, "held": 0, "not_evaluable": 1}}
    html = render_check_html([d], ["<svg><text>&lt;script&gt;</text></svg>"], "site/")
    p = _parse(html.encode())
    assert p.scripts == [] and "img" not in p.tags
    assert "javascript:" not in " ".join(p.hrefs)
    assert EVIL in "".join(p.text)
    assert 'href="site/technique-tensor-parallelism.html"' in html


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "data:text/html,x", 'x" onmouseover="y', ""])
def test_site_url_refuses_script_urls(bad):
    with pytest.raises(OptkgError):
        check_site_url(bad)


def test_site_url_forms():
    assert check_site_url("site") == "site/"
    assert check_site_url("../exports/site/") == "../exports/site/"
    assert check_site_url("https://example.org/optkg") == "https://example.org/optkg/"


# ---------------------------------------------------------------------------------------------
# bytes and files

def test_same_bytes_under_another_hash_seed(site):
    code = ("import hashlib, sys; sys.path.insert(0, 'tests'); import kg; from kg.output.site import build_site; "
            "from test_site import _digest; print(_digest(build_site(kg.load_catalog())))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == _digest(site)
    assert build_site.__module__ == "kg.output.site"


def test_write_site_keeps_a_users_file(site, tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / "index.html").write_text("my own page\n")
    with pytest.raises(OptkgError, match="not written by"):
        write_site(site, out)
    assert (out / "index.html").read_text() == "my own page\n" and len(list(out.iterdir())) == 1  # nothing written
    write_site(site, out, force=True)
    assert (out / "index.html").read_bytes() == site["index.html"]
    write_site(site, out)  # its own files: replaced without --force
    assert check_site(site, out) == []
    (out / "graph.html").write_text("edited\n")
    (out / "stray.txt").write_text("x\n")
    problems = check_site(site, out)
    assert problems == [f"{out / 'graph.html'}: stale (differs from what the catalog generates)",
                        f"{out / 'stray.txt'}: not written by `optkg export site` (remove it)"]


def test_export_site_cli(cli, tmp_path):
    (tmp_path / "f.txt").write_text("x")
    code, _, err = cli("export", "site", "-o", str(tmp_path / "f.txt"))
    assert code == 2 and "not a folder" in err
    code, _, err = cli("export", "site", "-o", str(tmp_path / "no" / "such"))
    assert code == 2 and "does not exist" in err
    code, _, err = cli("export", "site", "--focus", "tensor-parallelism", "-o", str(tmp_path / "s"))
    assert code == 2 and "drop" in err


def test_export_site_refuses_a_symlinked_folder(cli, tmp_path):
    # -o onto a link to a folder would write the pages into the folder it points to: refused (one line, exit 2,
    # nothing written) unless --force, as a symlinked -o file is; a dangling link is refused even with --force
    from kg.cli.export import refuse_linked_folder
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target, target_is_directory=True)
    for what in (["site"], ["--all"]):
        code, out, err = cli("export", *what, "-o", str(tmp_path / "link"))
        assert code == 2 and err.count("\n") == 1, err
        assert f"-o {tmp_path / 'link'}: is a symbolic link to {target}; refusing to write through it" in err
        assert list(target.iterdir()) == []
    refuse_linked_folder(tmp_path / "link", force=True)  # --force writes into the target
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    code, _, err = cli("export", "site", "-o", str(tmp_path / "dangling"), "--force")
    assert code == 2 and "which does not exist" in err and not (tmp_path / "gone").exists()


def test_check_format_html(cli, tmp_path):
    out = tmp_path / "report.html"
    code, _, err = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "html", "-o", str(out))
    assert code == 0, err
    html = out.read_text()
    assert 'href="site/technique-tensor-parallelism.html"' in html  # the finding's technique
    assert "<code>kv-head-replication</code>" in html and "48,128" in html  # finding and KV table
    code, js, _ = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "json")
    unknown = json.loads(js)["not_evaluable"]
    assert unknown and f"Could not be evaluated ({len(unknown)})" in html
    assert all(f"<code>{u['rule_id']}</code>" in html for u in unknown)
    assert re.search(r"<svg[^>]*>", html) and "<?xml" not in html  # dot's SVG, inline
    code, _, err = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "html", "-o", str(out))
    assert code == 2 and "refusing to overwrite" in err  # never over a file without --force
    code, _, err = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "html",
                       "--site-url", "javascript:alert(1)", "-o", str(tmp_path / "r2.html"))
    assert code == 2 and "--site-url" in err and not (tmp_path / "r2.html").exists()
    code, _, err = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--site-url", "x/")
    assert code == 2 and "--site-url goes with --format html" in err


def test_export_all_writes_and_checks_the_site(cli, tmp_path):
    """`export --all` puts the site in <out>/site/, `--check` finds an edited page, a user's file there is kept."""
    from export_helpers import TINY
    out = tmp_path / "exports"
    code, _, err = cli("export", "--all", "--catalog", str(TINY), "-o", str(out))
    assert code == 0, err
    assert (out / "site" / "index.html").is_file() and (out / "site" / ".optkg-generated.json").is_file()
    assert "| [site/](site/index.html) |" in (out / "README.md").read_text()
    assert cli("export", "--all", "--check", "--catalog", str(TINY), "-o", str(out))[0] == 0
    page = out / "site" / "techniques.html"
    page.write_text("edited\n")
    code, stdout, _ = cli("export", "--all", "--check", "--catalog", str(TINY), "-o", str(out))
    assert code == 1 and f"{page}: stale (differs from what the catalog generates)" in stdout
    st = (out / "README.md").stat()
    before = (st.st_ino, st.st_mtime_ns)
    (out / "site" / ".optkg-generated.json").unlink()  # without optkg's marker the pages are the user's
    code, _, err = cli("export", "--all", "--catalog", str(TINY), "-o", str(out))
    assert code == 2 and "not written by `optkg export site`" in err and "nothing was written" in err
    st = (out / "README.md").stat()
    assert page.read_text() == "edited\n" and (st.st_ino, st.st_mtime_ns) == before  # refused before any write


def test_check_format_html_one_section_per_container(cli, tmp_path):
    f = tmp_path / "compose.yaml"
    svc = ("  {name}:\n    image: vllm/vllm-openai:v0.10.2\n"
           "    command: --model Qwen/Qwen3-235B-A22B --tensor-parallel-size {tp}\n"
           "    deploy:\n      resources:\n        reservations:\n          devices:\n"
           "            - driver: nvidia\n              count: {tp}\n              capabilities: [gpu]\n")
    f.write_text("services:\n" + svc.format(name="big", tp=8) + svc.format(name="small", tp=4))
    out = tmp_path / "r.html"
    code, _, err = cli("check", str(f), "--format", "html", "--site-url", "https://example.org/optkg", "-o", str(out))
    assert code in (0, 1), err
    html = out.read_text()
    assert html.count('<section class="report"') == 2 and html.count("<svg") == 2
    assert 'href="https://example.org/optkg/technique-tensor-parallelism.html"' in html
    assert "optkg export site -o https" not in html  # the hint names a folder only for a relative --site-url


# ---------------------------------------------------------------------------------------------
# check --format html of a training job (issue 16: it was refused with exit 2)

JOB_70B = ("torchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer --bf16 "
           "--micro-batch-size 1 --global-batch-size 1024 --seq-length 8192 --recompute-granularity selective")


def _cells(html: str, cls: str) -> list[list[str]]:
    """Rows of the table of class ``cls`` as text cells."""
    t = re.search(rf'<table class="{cls}">(.*?)</table>', html, flags=re.S).group(1)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", t.split("</thead>")[-1], flags=re.S)]


def test_check_format_html_training_job(cli, tmp_path):
    out = tmp_path / "train.html"
    code, _, err = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                       "--format", "html", "-o", str(out))
    assert code == 0, err
    html = out.read_text()
    p = _parse(html.encode())
    assert p.scripts == [] and html.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in html
    mem = {r[0]: r[1:] for r in _cells(html, "memory")}
    # the same numbers as the text report (tests/test_training_check_cli.py)
    assert mem["model states"][0] == "14.28 GiB" and mem["activations"][0] == "24.47 GiB"
    assert mem["total"] == ["38.75 GiB", "of 79.65 GiB (49%)"]
    assert dict((r[0], r[1]) for r in _cells(html, "layout"))["data parallel (DP)"] == "16"
    assert {"Megatron-LM theoretical memory", "llm-analysis 0.2.2"} <= {r[0] for r in _cells(html, "anchors")}
    for tid in ("tensor-parallelism", "pipeline-parallelism", "sequence-parallelism"):
        assert f'href="site/technique-{tid}.html"' in html
    text = " ".join(p.text)
    assert "512 x H100-SXM" in text
    assert not re.search(r"KV|kv-cache|concurrency|max_model_len|inference|serving", text)
    assert "<svg" not in html  # no stack diagram for a training job


def test_check_format_html_training_findings_link_their_techniques(cli, tmp_path):
    cfg = tmp_path / "ds_config.json"
    cfg.write_text(json.dumps({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4,
                               "gradient_accumulation_steps": 16, "zero_optimization": {"stage": 2},
                               "pipeline": {"stages": 4}}))
    out = tmp_path / "r.html"
    code, _, err = cli("check", str(cfg), "--model", "meta-llama/Llama-3.1-8B", "--count", "16", "--gpu", "H100",
                       "--format", "html", "--site-url", "../exports/site", "-o", str(out))
    assert code == 1, err
    html = out.read_text()
    art = re.search(r'<article class="finding error" data-rule="deepspeed-zero-with-pipeline-engine">(.*?)</article>',
                    html, flags=re.S).group(1)
    assert 'href="../exports/site/technique-zero-2.html"' in art
    assert 'href="../exports/site/technique-pipeline-parallelism.html"' in art and "zero-3-fsdp" not in art
    assert "Could not be evaluated (2)" in html and "<code>training-memory-exceeds-gpu</code>" in html
    assert "Memory per GPU not computed" in html


def test_training_html_escapes_hostile_text():
    from kg.output.site.report_training import render_training_html
    d = {"kind": "training", "stack": {"name": EVIL, "framework": "deepspeed", "framework_version": EVIL, "model": EVIL,
                                       "gpu": EVIL, "source": EVIL, "settings": {"world_size": 8, "zero_stage": 2},
                                       "techniques": ["zero-2"]},
         "derived": {"parallel": {"tp_size": 1, "pp_size": 1, "cp_size": 1, "ep_size": 1, "dp_size": 8, "world_size": 8},
                     "batch": {"micro_batch_size": 1, "global_batch_size": 8, "dp_size": 8}},
         "findings": [{"rule_id": "r1", "severity": "error", "title": EVIL, "message": EVIL, "mechanism": EVIL,
                       "fix": EVIL, "fixes": [], "techniques": ["zero-2"], "numbers": {"x": EVIL},
                       "sources": [{"title": EVIL, "url": "javascript:alert(1)"}], "rule_file": "rules/x.yaml",
                       "rule_line": 3}],
         "not_evaluable": [{"rule_id": "r2", "missing": [EVIL], "needs": [EVIL], "reason": EVIL}],
         "notes": [EVIL], "in_effect": [{"message": EVIL, "coupling": EVIL}], "ignored_flags": [EVIL],
         "outcomes": {"fired": 1, "held": 0, "not_evaluable": 1, "not_applicable": 0}}
    html = render_training_html(d, "site/")
    p = _parse(html.encode())
    assert p.scripts == [] and "img" not in p.tags
    assert "javascript:" not in " ".join(p.hrefs)
    assert EVIL in "".join(p.text) and f"8 x {EVIL}" in "".join(p.text)
    assert 'href="site/technique-zero-2.html"' in html
