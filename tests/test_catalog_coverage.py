"""Coverage of the shipped catalog (issue: catalog breadth), and that the check has teeth."""
import shutil
from collections import Counter

from catalog_copy import REPO  # noqa: F401 - same repo root as conftest
from kg.knowledge.catalog import load_catalog


def coverage(cat):
    stages = Counter(s for t in cat.techniques.values() for s in t["coordinates"]["stages"])
    layers = Counter(layer for t in cat.techniques.values() for layer in cat.axes.layer_span(t["coordinates"]["layers"]))
    # a technique counts for its primary dimension and the secondary ones it names
    dims = Counter(d for t in cat.techniques.values()
                   for d in {t["coordinates"]["dimension"], *(t["coordinates"].get("secondary_dimensions") or [])})
    couplings = [c for t in cat.techniques.values() for c in t.get("couplings") or []]
    cross = [c for c in couplings if c["from_dimension"] != c["to_dimension"]]
    return stages, layers, dims, couplings, cross


def test_shipped_catalog_coverage(catalog):
    cat = catalog
    assert len(cat.techniques) >= 120
    for tid, t in cat.techniques.items():
        assert t["references"] and all(r["url"].startswith(("http://", "https://")) for r in t["references"]), tid
        assert t["benefits"] and t["costs"] and len(t["summary"]) >= 20, tid
    stages, layers, dims, couplings, cross = coverage(cat)
    assert all(stages[s] >= 12 for s in cat.axes.stage_ids), stages
    assert all(layers[layer] >= 8 for layer in cat.axes.layer_ids), layers
    assert all(dims[d] >= 8 for d in cat.axes.dimension_ids), dims
    assert len(couplings) >= 150 and len(cross) >= 30
    for c in couplings:
        assert c["kind"] and c["mechanism"] and c["sources"]
    # empty cells stay empty: some stage x layer x dimension cells hold nothing (they are the gaps)
    occupied = {cell for tid in cat.techniques for cell in cat.cells(tid)}
    total = len(cat.axes.stage_ids) * len(cat.axes.layer_ids) * len(cat.axes.dimension_ids)
    assert len(occupied) < total


def test_losing_a_reference_fails(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(REPO / "catalog", root)
    f = root / "techniques" / "tensor-parallelism.yaml"
    text = f.read_text()
    f.write_text(text[: text.index("references:")] + "references: []\n")
    _, problems = load_catalog(root, use_cache=False)
    assert any(p.file == str(f) and "references" in p.path for p in problems)
