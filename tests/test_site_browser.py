"""The explorer and the HTML check report in a real browser: Debian's headless Chromium driven by
Playwright (``executable_path``: no browser download). One browser for the whole module.

Chromium missing is a failure, not a skip: ``make test`` installs it (the Makefile's ``chromium``
target, as ``graphviz`` installs dot). Every request the pages make is intercepted: only ``file://``
is allowed, and any other request fails the test. Console errors fail it too. Screenshots go to
``$OPTKG_SCREENSHOT_DIR`` (default: a folder under pytest's tmp dir), never into the repository.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from export_helpers import REPO

CHROMIUM_NAMES = ("chromium", "chromium-browser")
# make test runs the suite with pytest-xdist --dist loadgroup: this module stays on one worker (one browser)
pytestmark = pytest.mark.xdist_group("browser")


def _chromium() -> str:
    exe = os.environ.get("OPTKG_CHROMIUM") or next((shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n)), None)
    if not exe:
        pytest.fail("Chromium not found: `make test` installs it (apt-get install chromium); "
                    "or set OPTKG_CHROMIUM to a Chromium binary", pytrace=False)
    return exe


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    d = Path(os.environ.get("OPTKG_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def site_dir(catalog, tmp_path_factory, cli_module) -> Path:
    """The site and a check report beside it (its links point into site/)."""
    from kg.output.site import build_site, write_site
    root = tmp_path_factory.mktemp("explorer")
    (root / "site").mkdir()
    write_site(build_site(catalog), root / "site")
    code, _, err = cli_module("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "html",
                              "-o", str(root / "report.html"))
    assert code == 0, err
    code, _, err = cli_module("check", str(REPO / "tests" / "fixtures" / "training_cases" / "ds_zero2.json"),
                              "--model", "meta-llama/Llama-3.1-8B", "--count", "8", "--gpu", "H100",
                              "--format", "html", "-o", str(root / "training.html"))
    assert code in (0, 1), err
    return root


@pytest.fixture(scope="module")
def cli_module():
    from conftest import run_cli
    return run_cli


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package playwright is missing: pip install -e '.[test]' (make test does)", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Watch:
    """Console errors, page errors and every request a page made."""

    def __init__(self):
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.blocked: list[str] = []


@pytest.fixture(scope="module")
def ctx(browser):
    w = Watch()
    c = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")

    def route(r):
        url = r.request.url
        w.requests.append(url)
        if url.startswith("file://"):
            r.continue_()
        else:
            w.blocked.append(url)
            r.abort()

    c.route("**/*", route)
    c.watch = w
    yield c
    c.close()


@pytest.fixture
def page(ctx):
    pg = ctx.new_page()
    w = ctx.watch
    pg.on("console", lambda m: w.errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: w.errors.append(f"pageerror: {e}"))
    yield pg
    errors, blocked = list(w.errors), list(w.blocked)
    w.errors.clear()
    w.blocked.clear()
    pg.close()
    assert errors == [], errors
    assert blocked == [], f"network requests made: {blocked}"


def _url(site_dir: Path, name: str) -> str:
    return (site_dir / name).as_uri() if "#" not in name else (site_dir / name.split("#")[0]).as_uri() + "#" + name.split("#")[1]


def test_map_renders_all_techniques(page, site_dir, catalog, shots):
    page.goto(_url(site_dir, "site/index.html"))
    panel = page.locator('section.panel[data-stage="combined"]')
    assert panel.is_visible()
    ids = set(panel.locator("li[data-t]").evaluate_all("els => els.filter(e => e.offsetParent).map(e => e.dataset.t)"))
    assert ids == set(catalog.techniques)
    assert page.locator('section.panel[data-stage="training"]').is_hidden()  # stage panels: one at a time
    from kg.output.diagrams.map import map_cells
    occupied = sum(1 for c in map_cells(catalog)["panels"][-1]["cells"] if c["count"])  # the combined panel
    assert page.text_content("#count") == \
        f"Showing {len(catalog.techniques)} of {len(catalog.techniques)} techniques in {occupied} cells."
    page.screenshot(path=str(shots / "map.png"))


def _visible_cells(page) -> int:
    return page.locator('section.panel[data-stage="combined"] td.cell').evaluate_all(
        "els => els.filter(e => e.offsetParent && [...e.querySelectorAll('li[data-t]')].some(l => l.offsetParent)).length")


def test_a_filter_changes_the_visible_cells(page, site_dir, shots, catalog):
    from kg.output.diagrams.map import map_cells
    cells = map_cells(catalog)["panels"][-1]["cells"]  # the combined panel
    page.goto(_url(site_dir, "site/index.html"))
    before = _visible_cells(page)
    page.select_option("#f-dimension", "network")
    after = _visible_cells(page)
    assert before == sum(1 for c in cells if c["count"])
    assert after == sum(1 for c in cells if c["count"] and c["dimension"] == "network") and 0 < after < before
    assert page.locator('section.panel[data-stage="combined"] th[data-dim="compute"]').is_hidden()
    page.select_option("#f-dimension", "")
    page.select_option("#f-release", label="vllm 0.10.2")  # DCP arrived in vLLM 0.10.2 (vllm.yaml:89)
    assert page.locator('section.panel[data-stage="combined"] li[data-t="decode-context-parallelism"]').first.is_visible()
    page.select_option("#f-release", label="vllm 0.10.1.1")
    assert page.locator('section.panel[data-stage="combined"] li[data-t="decode-context-parallelism"]').first.is_hidden()
    assert page.locator('section.panel[data-stage="combined"] li[data-t="tensor-parallelism"]').first.is_visible()
    page.select_option("#f-stage", "training")
    assert page.locator('section.panel[data-stage="training"]').is_visible()
    assert page.locator('section.panel[data-stage="combined"]').is_hidden()
    page.screenshot(path=str(shots / "map-filtered.png"))


def test_hovering_a_cell_shows_full_names(page, site_dir, shots):
    page.goto(_url(site_dir, "site/index.html"))
    cell = page.locator('section.panel[data-stage="combined"] tr[data-layer="L4"] td[data-dim="compute"]')
    cell.hover()
    tip = page.locator("#tip")
    assert tip.is_visible()
    text = tip.text_content()
    assert text.startswith("Model & algorithm × Compute\n") and "\nTensor parallelism\n" in text + "\n"
    assert "\nBubble-reducing pipeline schedules (interleaved 1F1B, zero bubble)" in text  # shown as "ZB / interleaved PP"
    page.screenshot(path=str(shots / "map-hover.png"))
    page.mouse.move(0, 0)
    assert tip.is_hidden()
    # the keyboard reaches the same tooltip: a cell takes focus
    cell.focus()
    assert tip.is_visible() and "Tensor parallelism" in tip.text_content()


def test_technique_page_shows_its_couplings(page, site_dir, shots, catalog):
    page.goto(_url(site_dir, "site/technique-tensor-parallelism.html"))
    assert page.text_content("h1").startswith("Tensor parallelism")
    out = page.locator("#couplings-out table tbody tr")
    # as many rows as catalog/techniques/tensor-parallelism.yaml declares couplings (2 today), and the couplings
    # other techniques declare into it
    assert out.count() == len(catalog.techniques["tensor-parallelism"]["couplings"])
    assert "tp_size > num_key_value_heads" in " ".join(out.all_text_contents())
    into = sum(1 for t in catalog.techniques.values() for c in t.get("couplings") or []
               if catalog.resolve(c.get("target") or "") == "tensor-parallelism")
    assert into >= 5 and page.locator("#couplings-in table tbody tr").count() == into
    page.click('#couplings-in a[href="technique-custom-allreduce.html"] >> nth=0')
    assert page.text_content("h1").startswith("Custom one-shot all-reduce")
    page.go_back()
    page.screenshot(path=str(shots / "technique.png"))


def test_graph_view_focuses_on_tensor_parallelism(page, site_dir, shots):
    page.goto(_url(site_dir, "site/graph.html#focus=t:tensor-parallelism&depth=1"))
    status = page.locator("#g-status")
    assert status.get_attribute("data-focus") == "t:tensor-parallelism"
    assert status.text_content().startswith("Focus: Tensor parallelism · depth 1 · ")
    edges = page.locator("#g-edges li")
    n1 = edges.count()
    assert n1 > 5 and all("Tensor parallelism" in t or "TP" in t for t in edges.all_text_contents()[:1])
    assert "condition: tp_size > num_key_value_heads" in " ".join(edges.all_text_contents())
    canvas = page.locator("#cy canvas")
    assert canvas.count() >= 1
    page.screenshot(path=str(shots / "graph-tp.png"))
    # the drawing is deterministic (breadthfirst layout, sorted input): a second load paints the same pixels
    first = page.locator("#cy").screenshot()
    page.reload()
    page.wait_for_function("document.getElementById('g-status').dataset.focus === 't:tensor-parallelism'")
    assert page.locator("#cy").screenshot() == first
    # depth 2 draws more, never the whole graph
    page.select_option("#g-depth", "2")
    page.wait_for_function("document.getElementById('g-status').textContent.includes('depth 2')")
    text = status.text_content()
    nodes = int(text.split("depth 2 · ")[1].split(" nodes")[0])
    assert 17 < nodes <= 60
    # depth 3 reaches most of the catalog: the view stops at 60 nodes and says how many it left out
    page.select_option("#g-depth", "3")
    page.wait_for_function("document.getElementById('g-status').textContent.includes('depth 3')")
    text = status.text_content()
    assert int(text.split("depth 3 · ")[1].split(" nodes")[0]) == 60 and "more neighbours not drawn" in text
    # a property as the focus
    page.goto(_url(site_dir, "site/graph.html#focus=p:kv_head_replication&depth=1"))
    page.wait_for_function("document.getElementById('g-status').dataset.focus === 'p:kv_head_replication'")
    assert page.text_content("#g-status").startswith("Focus: KV-head replication factor · depth 1 · ")
    assert "Tensor parallelism causes KV-head replication factor" in " ".join(page.locator("#g-edges li").all_text_contents())
    # only the 'requires' kind: fewer couplings
    page.goto(_url(site_dir, "site/graph.html#focus=t:tensor-parallelism&depth=1&kinds=requires"))
    page.wait_for_function("document.getElementById('g-edges').children.length > 0")
    assert 0 < page.locator("#g-edges li").count() < n1


def test_check_report_links_its_finding_to_the_technique(page, site_dir, shots):
    page.goto(_url(site_dir, "report.html"))
    finding = page.locator('article.finding[data-rule="kv-head-replication"]')
    assert finding.is_visible()
    assert page.locator(".diagram svg").count() == 1
    page.screenshot(path=str(shots / "report.png"))
    finding.locator('a.tech:text("tensor-parallelism")').first.click()
    assert page.url.endswith("/site/technique-tensor-parallelism.html")
    assert page.text_content("h1").startswith("Tensor parallelism")


def test_check_report_links_each_term_to_the_glossary_and_says_how_to_give_missing_facts(page, site_dir):
    page.goto(_url(site_dir, "report.html"))
    rows = page.locator("table.ne tbody tr")
    assert rows.count() >= 1 and "measured from a request trace by `optkg fit TRACE`" in " ".join(rows.all_text_contents())
    page.locator('ul.terms a:text-is("DCP")').click()
    assert page.url.endswith("/site/glossary.html#dcp")
    assert "decode context parallelism" in page.locator("dt#dcp + dd").text_content().lower()


def test_training_report_shows_its_layout_and_links_its_techniques(page, site_dir, shots):
    page.goto(_url(site_dir, "training.html"))
    assert page.locator("table.layout").is_visible() and page.locator("section.report.training").count() == 1
    assert page.locator("table.kv").count() == 0  # a training report has no KV-cache table
    page.screenshot(path=str(shots / "training.png"))
    page.locator('table.stack a.tech:text("zero-2")').first.click()
    assert page.url.endswith("/site/technique-zero-2.html")


BROKEN_WORDS_JS = """sel => {
  const out = [];
  document.querySelectorAll(sel).forEach(cell => {
    if (!cell.offsetParent) return;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const re = /[A-Za-z0-9_.]+/g;  // a word: an identifier or a number (spaces, hyphens, commas may wrap)
      let m;
      while ((m = re.exec(n.textContent)) !== null) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        if (r.getClientRects().length > 1) out.push(m[0]);
      }
    }
  });
  return out;
}"""

OVERLAPS_JS = """() => {
  const cy = window.optkgGraph, boxes = [];
  cy.nodes().forEach(n => boxes.push([n.data('label'), n.boundingBox({includeLabels: true, includeNodes: true})]));
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i][1], b = boxes[j][1];
    const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1), h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
    if (w > 0.5 && h > 0.5) out.push([boxes[i][0], boxes[j][0]]);
  }
  return [boxes.length, out];
}"""


def test_matrix_is_a_grid_with_sticky_headers_and_verdict_colours(page, site_dir, shots):
    page.goto(_url(site_dir, "site/matrix-vllm.html"))
    grid = page.locator("table.grid")
    cols = grid.locator("thead th.col").count()
    rows = grid.locator("tbody tr").count()
    assert cols == rows and cols > 40  # technique x technique: every technique in a non-ok pair, both ways
    pairs = page.locator("table.pairs tbody tr").count()
    assert grid.locator("td.v").count() == 2 * pairs  # each pair in both of its cells
    cell = grid.locator("td.v.conflict").first
    assert cell.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(249, 214, 217)"
    assert grid.locator("td.v.conditional").first.evaluate("e => getComputedStyle(e).backgroundColor") == \
        "rgb(255, 240, 194)"
    page.screenshot(path=str(shots / "matrix.png"))
    # hover: the cell's condition, rule and evidence in the tooltip
    link = grid.locator('td.v a[aria-label^="Decode context parallelism with Tensor parallelism"]').first
    link.hover()
    tip = page.locator("#tip")
    assert tip.is_visible() and "condition: " in tip.text_content() and "rule: " in tip.text_content()
    page.screenshot(path=str(shots / "matrix-hover.png"))
    # click: its row in the pair list, which holds the evidence links
    link.click()
    target = page.evaluate("location.hash")
    assert target.startswith("#pair-")
    row = page.locator(f"tr{target}")
    assert "Decode context parallelism" in row.text_content() and row.locator("a[href^='http']").count() >= 1
    # the headers stay while the grid scrolls both ways
    wrap = page.locator(".gridwrap")
    wrap.evaluate("e => { e.scrollTop = 400; e.scrollLeft = 600; }")
    top = wrap.evaluate("e => e.getBoundingClientRect().top")
    head = grid.locator("thead th.col").nth(30).evaluate("e => e.getBoundingClientRect().top")
    left = wrap.evaluate("e => e.getBoundingClientRect().left")
    rowhead = grid.locator("tbody th").nth(20).evaluate("e => e.getBoundingClientRect().left")
    assert abs(head - top) <= 2 and abs(rowhead - left) <= 2


@pytest.mark.parametrize("name", ["site/matrix.html", "site/matrix-vllm.html", "site/matrix-sglang.html"])
def test_no_matrix_column_is_narrower_than_its_longest_word(page, site_dir, name):
    """The pair list's Rule column broke rule ids one letter per line (overflow-wrap: anywhere): now a word is
    only ever wrapped at a space or a hyphen, in the list and in the grid's headers."""
    page.goto(_url(site_dir, name))
    assert page.evaluate(BROKEN_WORDS_JS, "table.pairs td, table.grid th") == []


@pytest.mark.parametrize("focus", ["t:tensor-parallelism", "t:decode-context-parallelism", "p:kv_head_replication"])
def test_no_graph_labels_overlap_in_the_default_view(page, site_dir, focus, shots):
    page.goto(_url(site_dir, f"site/graph.html#focus={focus}&depth=1"))
    page.wait_for_function(f"document.getElementById('g-status').dataset.focus === '{focus}'")
    n, overlaps = page.evaluate(OVERLAPS_JS)
    assert n > 5 and overlaps == []
    if focus == "t:tensor-parallelism":
        page.screenshot(path=str(shots / "graph.png"))
        # kinds differ by line style as well as colour: each drawn edge's style is its kind's
        drawn = page.evaluate("() => window.optkgGraph.edges().map(e => [e.data('kind'), e.style('line-style'), "
                              "e.style('width'), e.style('target-arrow-shape'), e.style('line-color')])")
        looks = {k: tuple(rest) for k, *rest in drawn}
        assert len(looks) >= 4 and len(set(looks.values())) == len(looks)  # one look per kind
        assert len({(ls, w, a) for ls, w, a, _ in looks.values()}) == len(looks)  # ... without colour too
        assert page.locator("section.legend-box li svg.kindline").count() == 6


def test_matrix_release_choice(page, site_dir):
    page.goto(_url(site_dir, "site/matrix-vllm.html"))
    rows = page.locator("table.matrix tbody tr")
    assert rows.count() > 50
    row = page.locator("#cell-decode-context-parallelism--tensor-parallelism").locator("xpath=ancestor::tr")
    assert row.count() == 1 and "conditional" in row.text_content()
    page.select_option("#release-select", label="0.10.2")
    page.wait_for_url("**/matrix-vllm-*.html")
    assert "0.10.2" in page.text_content("h1") and page.locator("table.matrix tbody tr").count() > 50


def test_static_parts_work_without_javascript(browser, site_dir, shots):
    c = browser.new_context(java_script_enabled=False)
    blocked = []
    c.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else (blocked.append(r.request.url), r.abort()))
    pg = c.new_page()
    pg.goto(_url(site_dir, "site/index.html"))
    assert pg.locator("#filters").is_hidden()  # the filters need the script; everything else is there
    assert pg.locator("section.panel").count() == 6 and pg.locator('section.panel[data-stage="training"]').is_visible()
    pg.goto(_url(site_dir, "site/matrix-vllm.html"))
    assert pg.locator("table.matrix tbody tr").count() > 50
    pg.goto(_url(site_dir, "site/graph.html"))
    assert pg.locator("noscript").count() == 1
    pg.screenshot(path=str(shots / "graph-nojs.png"))
    c.close()
    assert blocked == []


def test_no_request_left_the_disk(ctx):
    assert ctx.watch.requests and all(u.startswith("file://") for u in ctx.watch.requests), \
        [u for u in ctx.watch.requests if not u.startswith("file://")]


CONTRAST_JS = """() => {
  const lin = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  const bg = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  document.querySelectorAll("body *").forEach(el => {
    if (!el.offsetParent && getComputedStyle(el).position !== "fixed") return;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) return;
    const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    out.push([ratio, el.tagName + "." + el.className, el.textContent.trim().slice(0, 40)]);
  });
  return out;
}"""


@pytest.mark.parametrize("name", ["site/index.html", "site/technique-tensor-parallelism.html", "site/matrix-vllm.html",
                                  "site/graph.html#focus=t:tensor-parallelism", "report.html", "training.html"])
def test_text_contrast_is_at_least_4_5(page, site_dir, name):
    """WCAG 2.1 AA: every visible text element against its background, computed in the browser."""
    page.goto(_url(site_dir, name))
    rows = page.evaluate(CONTRAST_JS)
    assert len(rows) > 20
    low = sorted((r for r in rows if r[0] < 4.5), key=lambda r: r[0])
    assert low == [], low[:10]


def test_keyboard_reaches_the_cells_and_the_pages(page, site_dir):
    page.goto(_url(site_dir, "site/index.html"))
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"  # first stop: skip to content
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    for _ in range(60):  # the filters, then the first map cell, by Tab alone
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('td.cell')"):
            break
    assert page.evaluate("document.activeElement.matches('td.cell')")
    assert page.locator("#tip").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("#tip").is_hidden()
    first = page.evaluate("[document.activeElement.closest('tr').dataset.layer, document.activeElement.dataset.dim]")
    assert first == ["L7", "compute"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")  # arrows move between cells: one right, one down
    assert page.evaluate("[document.activeElement.closest('tr').dataset.layer, document.activeElement.dataset.dim]") \
        == ["L6", "storage"]
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("[document.activeElement.closest('tr').dataset.layer, document.activeElement.dataset.dim]") == first
    page.keyboard.press("Tab")  # into the cell: its first technique link; Enter opens the page
    assert page.evaluate("document.activeElement.tagName") == "A"
    target = page.evaluate("document.activeElement.getAttribute('href')")
    page.keyboard.press("Enter")
    page.wait_for_url("**/" + target)
    assert page.url.endswith("/" + target)
