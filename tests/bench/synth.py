"""Synthetic catalogs for the benchmark: the shipped catalog scaled to N techniques.

``make_catalog(out, n)`` writes ``out/catalog`` and ``out/rules``:

- every shipped technique file, unchanged (so the engine flag tables, the shipped rules and real
  stacks keep working), plus ``n - shipped`` synthetic entries;
- a synthetic entry is a real entry (cycled through the shipped ones) with a new id
  ``<id>-s<NNNNN>``, name and aliases, its property couplings kept and its technique couplings
  re-pointed at other synthetic entries so that every entry has ``COUPLINGS`` (5) couplings.
  Targets are ``i + d`` for d in (1, 2, 3, 5, 8) (mod the synthetic count m; used only when no
  ``m - d`` is itself an offset), so no pair of entries couples both ways and the contradiction
  check has real work but nothing to report;
- rules in proportion: one ``check`` rule per ``TECHNIQUES_PER_RULE`` (10) techniques, the shipped
  rules plus synthetic ones whose ``condition``/``numbers``/``message`` are the shipped rules'
  bodies (cycled), each matching one synthetic technique and the model fact.

Deterministic: the same (source catalog, n) gives byte-identical files.
"""
from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

COUPLINGS = 5
OFFSETS = (1, 2, 3, 5, 8)
TECHNIQUES_PER_RULE = 10


def _load(p: Path) -> Any:
    with p.open(encoding="utf-8") as fh:
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _dump(data: Any, p: Path) -> None:
    text = yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                     allow_unicode=True, width=120)
    p.write_text("# yaml-language-server: $schema=../schema/technique.schema.json\n" + text, encoding="utf-8")


def synthetic_ids(src_catalog: Path, n: int) -> list[str]:
    """Ids of the synthetic entries ``make_catalog`` writes for ``n`` techniques (in order)."""
    real = sorted((src_catalog / "techniques").glob("*.yaml"))
    return [f"{real[i % len(real)].stem}-s{i:05d}" for i in range(max(0, n - len(real)))]


def make_catalog(out: Path, n: int, src_root: Path) -> dict[str, Any]:
    """Write a catalog of ``n`` techniques (>= the shipped count) and its rules under ``out``.

    ``src_root`` holds the source ``catalog/`` and ``rules/``. Returns counts
    {techniques, synthetic, couplings, rules}.
    """
    src_cat = src_root / "catalog"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src_cat, out / "catalog", ignore=shutil.ignore_patterns("techniques", "__pycache__"))
    tdir = out / "catalog" / "techniques"
    tdir.mkdir(parents=True)
    real_files = sorted((src_cat / "techniques").glob("*.yaml"))
    real = [_load(f) for f in real_files]
    for f in real_files:
        shutil.copy(f, tdir / f.name)
    pool = [c for t in real for c in (t.get("couplings") or []) if isinstance(c, dict) and "target" in c]
    ids = synthetic_ids(src_cat, n)
    m = len(ids)
    couplings = sum(len(t.get("couplings") or []) for t in real)
    for i, sid in enumerate(ids):
        t = copy.deepcopy(real[i % len(real)])
        suffix = f"-s{i:05d}"
        t["id"] = sid
        t["name"] = f"{t['name']} (synthetic {i:05d})"
        if t.get("aliases"):
            t["aliases"] = [f"{a}{suffix}" for a in t["aliases"]]
        if t.get("status") == "deprecated":
            t["status"] = "experimental"
            t.pop("replaced_by", None)
        props = [c for c in (t.get("couplings") or []) if "property" in c][:2]
        targets = []
        if m > max(OFFSETS) and not any((m - d) in OFFSETS for d in OFFSETS):  # no coupling both ways
            for k, d in enumerate(OFFSETS[: COUPLINGS - len(props)]):
                c = copy.deepcopy(pool[(i + k) % len(pool)]) if pool else {
                    "kind": "causes", "from_dimension": "compute", "to_dimension": "storage",
                    "mechanism": "synthetic coupling for the benchmark", "sources": t["references"][:1]}
                c["target"] = ids[(i + d) % m]
                c.pop("property", None)
                targets.append(c)
        t["couplings"] = props + targets
        couplings += len(t["couplings"])
        _dump(t, tdir / f"{sid}.yaml")
    # rules: shipped + synthetic, one check rule per TECHNIQUES_PER_RULE techniques
    rdir = out / "rules"
    shutil.copytree(src_root / "rules", rdir, ignore=shutil.ignore_patterns("__pycache__"))
    docs = [_load(f) or {} for f in sorted(rdir.glob("*.yaml"))]  # each file parsed once
    shipped = [r for d in docs if d.get("ruleset") == "check" for r in d.get("rules") or []]
    want = max(0, n // TECHNIQUES_PER_RULE - len(shipped))
    rules = []
    for j in range(min(want, m)):
        base = copy.deepcopy(shipped[j % len(shipped)])
        target = ids[(j * TECHNIQUES_PER_RULE) % m]
        r = {"id": f"synthetic-{j:05d}", "title": f"{base['title']} (synthetic, {target})",
             "severity": base.get("severity", "warning"), "tags": ["synthetic"] + list(base.get("tags") or []),
             "match": [{"technique": target}, {"kind": "model"}], "message": base["message"],
             "mechanism": base.get("mechanism", ""), "sources": base["sources"]}
        for k in ("condition", "numbers", "cost_dimension", "from_dimension", "fix"):
            if base.get(k):
                r[k] = base[k]
        rules.append(r)
    if rules:
        text = yaml.dump({"ruleset": "check", "description": "synthetic rules for the benchmark", "rules": rules},
                         Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, allow_unicode=True, width=120)
        (rdir / "synthetic.yaml").write_text(text, encoding="utf-8")
    return {"techniques": len(real) + m, "synthetic": m, "couplings": couplings, "rules": len(shipped) + len(rules)}
