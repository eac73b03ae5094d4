"""The two vLLM capacity refusals are backed at every release they apply to (issue 13, consist5 items 8-9).

max-model-len-exceeds-kv-capacity (V1, ``check_enough_kv_cache_memory``) now starts at 0.7.0, the first release
whose v1/core/kv_cache_utils.py has the check (0.6.6 has the file, not the check); the V0 rule's check moved from
executor/utils.py (0.4.0.post1) to worker/worker.py (0.4.1). ``optkg evidence --release R`` checks the newest item
at or before R: that item's snippet must be in R's file (found or moved, never gone) for every release the rule
covers that is unpacked under /work/dl (the released wheels; skipped where they are not)."""
from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

from kg.analyses.evidence import WheelReader, items_from_rules, select_items
from kg.engine.rules import load_rules

DL = Path("/work/dl")
RULES = ("max-model-len-exceeds-kv-capacity", "max-model-len-exceeds-kv-blocks-v0")


def _releases() -> list[str]:
    out = []
    for d in DL.glob("vllm-*"):
        rel = d.name[len("vllm-"):]
        try:
            Version(rel)
        except InvalidVersion:
            continue
        if (d / "vllm").is_dir() or any(d.glob("vllm-*.whl")):
            out.append(rel)
    return sorted(out, key=Version)


def _text(rel: str, path: str) -> str:
    """The file at a release: unpacked beside the wheel, else read from the wheel (as optkg evidence does)."""
    src = DL / f"vllm-{rel}" / path
    if src.is_file():
        return src.read_text(encoding="utf-8", errors="replace")
    wheels = sorted((DL / f"vllm-{rel}").glob("vllm-*.whl"))
    assert wheels, f"vllm {rel}: {path} is not unpacked and no wheel is there"
    reader = WheelReader(wheels[0])
    try:
        lines = reader.lines(path)
    finally:
        reader.close()
    assert lines is not None, f"vllm {rel}: {path} is not in {wheels[0].name}"
    return "\n".join(lines)


def _items():
    rs, problems = load_rules("check")
    assert not problems
    return [i for i in items_from_rules([r for r in rs.rules if r.id in RULES])]


def test_bounds_and_lower_bound_evidence():
    rs, _ = load_rules("check")
    by_id = {r.id: r for r in rs.rules}
    assert by_id["max-model-len-exceeds-kv-capacity"].applies_to["versions"] == ">=0.7.0"
    assert by_id["max-model-len-exceeds-kv-blocks-v0"].applies_to["versions"] == ">=0.4.0,<0.11.0"
    releases = {(i.owner, i.release) for i in _items()}
    assert ("rule:max-model-len-exceeds-kv-capacity", "0.7.0") in releases
    assert ("rule:max-model-len-exceeds-kv-blocks-v0", "0.4.1") in releases  # executor/utils.py is gone there


def test_every_unpacked_release_in_range_finds_its_snippet():
    releases = _releases()
    if not releases:
        pytest.skip("released vLLM sources are not unpacked under /work/dl on this machine")
    items = _items()
    checked = 0
    for rel in releases:
        for item, _ in select_items(items, "vllm", rel):
            assert item.snippet in _text(rel, item.path), f"{item.owner} at {rel}: {item.path}: {item.snippet!r}"
            checked += 1
    assert checked >= 2 * len([r for r in releases if Version("0.7.0") <= Version(r) < Version("0.11.0")])
