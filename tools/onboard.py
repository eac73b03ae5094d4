"""Onboard one engine release: fetch its wheel, regenerate every generated table, check the evidence, say what changed.

Usage: python tools/onboard.py ENGINE RELEASE [--wheel-dir DIR]...   (make onboard ENGINE=vllm RELEASE=0.34.0)

1. the wheel: ``--wheel-dir`` folders (default /work/wheels), the optkg wheel cache, else ``pip download --no-deps``;
   its Python files are unpacked to ``$OPTKG_DL_DIR/<engine>-<release>`` (default /work/dl) for the other tools;
2. the generated tables, merged for a release newer than every scanned one (earlier releases keep their ranges):
   catalog/engines/options/<engine>.yaml (the options the CLI accepts: since / until / last_seen per option),
   catalog/engines/values/vllm-quantization.yaml (the --quantization names), catalog/engines/checks/sites/
   <engine>-<release>.yaml (every startup check site, classified) and the capability tables of
   tools/engine_capabilities.py where the engine has them;
3. ``optkg evidence --engine E --release R``: every fact that claims the release, found / moved / gone;
4. prints what changed against the newest release scanned before: options added and removed, quantisation names,
   check sites added and removed (by stable id), capability rows, and every evidence item gone.

Hand-written facts (rule ranges, release defaults) are not edited: the gone items are what to look at. Exit 0 when
nothing is gone, 1 when some evidence item is gone, 2 on a usage or download error.
"""
from __future__ import annotations

import argparse
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import engine_options  # noqa: E402
from engine_check_sites import SCOPES  # noqa: E402


def dl_dir() -> Path:
    return Path(os.environ.get("OPTKG_DL_DIR") or "/work/dl")


def unpack(wheel: Path, dest: Path) -> Path:
    """The wheel's ``.py`` files under ``dest`` (kept when already there)."""
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".py") and ".." not in name and not name.startswith("/"):
                out = dest / name
                if not out.exists():
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
    return dest


def merge_ranges(old: dict[str, dict], found: dict[str, tuple[str, int]], release: str, scanned: list[str],
                 package: str) -> tuple[dict[str, dict], list[str], list[str]]:
    """Merge one release newer than every scanned one into a {name: {since, last_seen, until?, absent_in?,
    evidence}} table (engine_options._ranges shape). Returns (table, added names, removed names)."""
    prev = scanned[-1] if scanned else None
    out = {k: dict(v) for k, v in old.items()}
    added, removed = [], []
    for name, (path, line) in found.items():
        e = out.get(name)
        ev = {"line": line, "package": package, "path": path, "release": release}
        if e is None:
            out[name] = {"evidence": ev, "last_seen": release, "since": release}
            added.append(name)
            continue
        if e.get("until"):  # gone in between, back now: the releases it missed are absent_in
            gap = [r for r in scanned if Version(str(e["until"])) <= Version(r)]
            e["absent_in"] = sorted(set(map(str, e.get("absent_in") or [])) | set(gap), key=Version)
            del e["until"]
            added.append(name)
        e["last_seen"], e["evidence"] = release, ev
    for name, e in out.items():
        if name not in found and not e.get("until") and str(e.get("last_seen")) == str(prev):
            e["until"] = release
            removed.append(name)
    return dict(sorted(out.items())), sorted(added), sorted(removed)


def newest(scanned: list[str]) -> str | None:
    return max(scanned, key=Version) if scanned else None


def onboard_options(engine: str, release: str, root: Path) -> tuple[list[str], list[str]] | None:
    cfg = engine_options.ENGINES.get(engine)
    path = ROOT / "catalog" / "engines" / "options" / f"{engine}.yaml"
    if cfg is None or not path.exists():
        return None
    data = yaml.safe_load(path.read_text())
    scanned = [str(r) for r in data.get("scanned") or []]
    gone: dict[str, dict] = {}  # the release's removed variables (vLLM): refreshed also for a scanned release
    for g in cfg.get("env_files", []):
        for f in sorted(root.glob(g)):
            gone.update({k: {"path": str(f.relative_to(root)), **v}
                         for k, v in engine_options.removed_env_in(f).items()})
    removed_env = {str(k): v for k, v in (data.get("removed_env") or {}).items() if str(k) != release}
    if gone:
        removed_env[release] = gone
    if removed_env != {str(k): v for k, v in (data.get("removed_env") or {}).items()}:
        data["removed_env"] = removed_env
        path.write_text(engine_options.render({**data, "scanned": scanned}))
    if release in scanned:
        return [], []
    if scanned and Version(release) < Version(newest(scanned)):
        raise SystemExit(f"onboard: {engine} {release} is older than the newest scanned release {newest(scanned)}: "
                         "re-run tools/engine_options.py over every unpacked wheel instead")
    found: dict[str, tuple[str, int]] = {}
    for g in cfg["globs"]:
        for f in sorted(root.glob(g)):
            rel = str(f.relative_to(root))
            for opt, line in engine_options.options_in(f, rel, cfg["dataclass_classes"]).items():
                found.setdefault(opt, (rel, line))
    envs: dict[str, tuple[str, int]] = {}
    for g in cfg.get("env_files", []):
        for f in sorted(root.glob(g)):
            for name, line in engine_options.env_in(f, (engine.upper() + "_", "SGL_")).items():
                envs.setdefault(name, (str(f.relative_to(root)), line))
    opts, added, removed = merge_ranges(data.get("options") or {}, found, release, scanned, cfg["package"])
    env, _, _ = merge_ranges(data.get("env") or {}, envs, release, scanned, cfg["package"]) if envs else (data.get("env") or {}, [], [])
    new = {"engine": engine, "scanned": scanned + [release], "options": opts, "env": env, "removed_env": removed_env}
    path.write_text(engine_options.render(new))
    return added, removed


def onboard_quant(release: str, root: Path) -> tuple[list[str], list[str]] | None:
    import engine_quant_methods as q
    path = ROOT / "catalog" / "engines" / "values" / "vllm-quantization.yaml"
    src = root / q.REL
    if not path.exists() or not src.exists():
        return None
    text = path.read_text()
    head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    data = yaml.safe_load(text)
    scanned = [str(r) for r in data.get("scanned") or []]
    if release in scanned:
        return [], []
    found = {n: (q.REL, line) for n, line in q.names_in(src).items()}
    methods, added, removed = merge_ranges(data.get("methods") or {}, found, release, scanned, "vllm")
    data.update({"scanned": scanned + [release], "methods": methods})
    path.write_text(head + yaml.safe_dump(data, sort_keys=False, width=120))
    return added, removed


def qualified_defaults(root: Path, prefixes: list[str]) -> dict[str, tuple[Any, str, int]]:
    """{Class.field: (literal default, path, line)} of the annotated class attributes under ``prefixes`` (config
    dataclasses and their ClassVar constants), read with ``ast``."""
    import ast

    from engine_check_classify import literal_default
    out: dict[str, tuple[Any, str, int]] = {}
    for pre in prefixes:
        base = root / pre
        files = [base] if base.suffix == ".py" else sorted(base.rglob("*.py")) if base.is_dir() else []
        for f in files:
            try:
                tree = ast.parse(f.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                for st in cls.body:
                    ok, val = literal_default(st)
                    if ok:
                        out[f"{cls.name}.{st.target.id}"] = (val, str(f.relative_to(root)), st.lineno)
    return out


def site_changes(engine: str, release: str) -> dict[str, Any]:
    from kg.analyses.enginechecks import all_sites, site_counts
    mine = [d for d in all_sites() if d["engine"] == engine]
    cur = next(d for d in mine if d["release"] == release)
    before = [d for d in mine if Version(d["release"]) < Version(release)]
    prev = before[-1] if before else None
    ids = {s["id"]: s for s in cur["sites"]}
    old = {s["id"]: s for s in prev["sites"]} if prev else {}
    added = [ids[i] for i in ids if i not in old]
    removed = [old[i] for i in old if i not in ids]
    key = lambda s: (s["path"], s["function"], s.get("message") or "")  # noqa: E731
    gone_keys = {key(s) for s in removed}
    changed = [s for s in added if key(s) in gone_keys]  # the same check under a changed condition
    ch_keys = {key(s) for s in changed}
    return {"release": release, "previous": prev["release"] if prev else None, "counts": site_counts(cur),
            "previous_counts": site_counts(prev) if prev else None, "changed": changed,
            "added": [s for s in added if key(s) not in ch_keys], "removed": [s for s in removed if key(s) not in ch_keys]}


def _line(s: dict[str, Any]) -> str:
    text = s.get("message") or s.get("condition") or ""
    return f"    {s['path']}:{s['line']} {s['function']}: {text[:80]}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=sorted(SCOPES))
    ap.add_argument("release")
    ap.add_argument("--wheel-dir", type=Path, action="append", default=[])
    ap.add_argument("--show", type=int, default=40, help="list at most this many added / removed items per kind")
    ap.add_argument("--pin", action="store_true", help="make RELEASE the newest release optkg knows: add it to the "
                    "release list, set PINNED_RELEASES and give open-ended rules an evidence item at it")
    a = ap.parse_args(argv)
    try:
        Version(a.release)
    except InvalidVersion:
        print(f"onboard: '{a.release}' is not a release number (e.g. 0.34.0)", file=sys.stderr)
        return 2
    from kg.analyses import evidence as ev
    from kg.core.errors import OptkgError
    package = SCOPES[a.engine][0]
    dirs = a.wheel_dir or [Path("/work/wheels")]
    try:
        wheel = ev.fetch_wheel(package, a.release, ev.default_cache_dir(), dirs)
    except OptkgError as e:
        print(f"onboard: {e}", file=sys.stderr)
        return 2
    print(f"== {a.engine} {a.release}: {wheel}")
    root = unpack(wheel, dl_dir() / f"{a.engine}-{a.release}")
    n = a.show
    opt = onboard_options(a.engine, a.release, root)
    if opt is not None:
        print(f"-- options accepted by the CLI (catalog/engines/options/{a.engine}.yaml): "
              f"{len(opt[0])} added, {len(opt[1])} removed")
        for name in opt[0][:n]:
            print(f"    + {name}")
        for name in opt[1][:n]:
            print(f"    - {name} (refused from {a.release})")
    if a.engine == "vllm":
        qm = onboard_quant(a.release, root)
        if qm is not None:
            print(f"-- --quantization names (catalog/engines/values/vllm-quantization.yaml): {len(qm[0])} added, "
                  f"{len(qm[1])} removed" + "".join(f"\n    + {x}" for x in qm[0]) + "".join(f"\n    - {x}" for x in qm[1]))
    import engine_check_sites
    sites_refused = engine_check_sites.main([a.engine, a.release, "--wheel", str(wheel)])  # 1: would cover less
    try:
        import engine_capabilities
        for line in engine_capabilities.onboard(a.engine, a.release, wheel):
            print(line)
    except ImportError:
        pass
    ch = site_changes(a.engine, a.release)
    c, p = ch["counts"], ch["previous_counts"]
    print(f"-- startup check sites: {c['total']} ({c['rule']} rule, {c['table']} table, {c['unknowable']} unknowable, "
          f"{c['uncovered']} not covered; {c['percent']:.1f} % of the knowable covered)"
          + (f"; {ch['previous']}: {p['total']} ({p['percent']:.1f} %)" if p else ""))
    if ch["previous"]:
        print(f"   since {ch['previous']} (stable ids): {len(ch['added'])} checks added, {len(ch['removed'])} removed, "
              f"{len(ch['changed'])} with a changed condition")
        for s in ch["added"][:n]:
            print("  +" + _line(s)[3:])
        for s in ch["removed"][:n]:
            print("  -" + _line(s)[3:])
        for s in ch["changed"][:n]:
            print("  ~" + _line(s)[3:])
        prev_root = dl_dir() / f"{a.engine}-{ch['previous']}"
        if prev_root.is_dir():
            old_d = qualified_defaults(prev_root, SCOPES[a.engine][1])
            new_d = qualified_defaults(root, SCOPES[a.engine][1])
            moved = [(k, old_d[k][0], new_d[k]) for k in sorted(set(old_d) & set(new_d)) if old_d[k][0] != new_d[k][0]]
            print(f"-- config defaults moved since {ch['previous']}: {len(moved)}")
            for k, was, (now, path, line) in moved[:n]:
                print(f"    {k}: {was!r} -> {now!r} ({path}:{line})")
        else:
            print(f"-- config defaults: {prev_root} is not unpacked; run onboard for {ch['previous']} to compare")
    if a.pin:
        for line in pin(a.engine, a.release, wheel):
            print(line)
    # the evidence of every fact that claims this release (a release newer than any recorded one: the newest facts)
    from kg.core import paths
    from kg.engine.rules import RULESET_KINDS, load_rules
    items = []
    for kind in RULESET_KINDS:
        rs, _ = load_rules(kind, paths.rules_dir())
        items += ev.items_from_rules(rs.rules)
    cat = paths.catalog_dir() / "engines"
    items += ev.items_from_engine_tables(cat) + ev.items_from_engine_checks(cat / "checks") \
        + ev.items_from_release_tables(cat / "releases")
    results = ev.run(items, a.engine, a.release, None, dirs + [wheel.parent])
    counts = ev.summary(results)
    print(f"-- optkg evidence --engine {a.engine} --release {a.release}: found {counts['found']}, moved {counts['moved']}, "
          f"gone {counts['gone']}")
    for r in results:
        if r.status == "gone":
            i = r.item
            print(f"    GONE {i.owner}: {i.path}: {i.snippet[:70]!r} (recorded at {i.release}"
                  + (f" line {i.line}" if i.line else "") + ")")
    if counts["gone"]:
        print("   each gone fact needs an upper bound (versions: '<" + a.release + "', evidence role: changed) or new "
              "evidence at " + a.release)
    return 1 if counts["gone"] or sites_refused else 0



# ---------------------------------------------------------------------------------------------
# --pin: make the release the newest one optkg knows

def pin(engine: str, release: str, wheel: Path) -> list[str]:
    """Add ``release`` to catalog/engines/releases/<engine>.yaml, set it in kg/engine/scope.py PINNED_RELEASES, and
    give every open-ended engine rule whose evidence is at the previously pinned release an item at ``release``
    (the same snippet, found or moved in the new wheel; its new line). Returns the lines to print; rules whose
    snippet is gone are listed, not edited."""
    import re

    from kg.analyses import evidence as ev
    from kg.engine.rules import RULESET_KINDS, load_rules
    from kg.engine.scope import ENGINE_PACKAGES, PINNED_RELEASES, bounds, spec_for
    out: list[str] = []
    prev = PINNED_RELEASES.get(engine)
    rel_file = ROOT / "catalog" / "engines" / "releases" / f"{engine}.yaml"
    if rel_file.exists():
        text = rel_file.read_text()
        m = re.search(r"^releases: \[(.*?)\]", text, re.S | re.M)
        if m and release not in [x.strip() for x in m.group(1).replace("\n", " ").split(",")]:
            text = text[:m.end() - 1] + f", {release}" + text[m.end() - 1:]
            rel_file.write_text(text)
            out.append(f"-- {rel_file.relative_to(ROOT)}: {release} added to the releases list")
    scope = ROOT / "kg" / "engine" / "scope.py"
    st = scope.read_text()
    new_st = re.sub(rf'("{engine}": )"[^"]+"', rf'\g<1>"{release}"', st, count=1)
    if new_st != st:
        scope.write_text(new_st)
        out.append(f"-- kg/engine/scope.py: PINNED_RELEASES[{engine}] {prev} -> {release}")
    if not prev or prev == release:
        return out
    package = ENGINE_PACKAGES.get(engine, engine)
    reader = ev.WheelReader(wheel)
    added, gone, skipped = 0, [], 0
    try:
        for kind in RULESET_KINDS:
            rs, _ = load_rules(kind, ROOT / "rules")
            for r in rs.rules:
                engines = (r.applies_to or {}).get("engines") or []
                spec = spec_for((r.applies_to or {}).get("versions"), engine)
                if engine not in engines or not spec or bounds(spec)[1]:
                    continue
                mine = [e for e in r.evidence or [] if str(e.get("package")) == package]
                if not mine or any(str(e.get("release")) == release for e in mine):
                    continue
                olds = [e for e in mine if str(e.get("release")) == prev and e.get("role", "holds") != "changed"]
                for e in olds:
                    item = ev.Item(f"rule:{r.id}", engine, package, prev, str(e["path"]), str(e["snippet"]), e.get("line"))
                    res = ev.check_item(item, reader, release)
                    if res.status == "gone":
                        gone.append(f"{r.id}: {e['path']}: {str(e['snippet'])[:60]!r}")
                        continue
                    new_line = min(res.lines, key=lambda n: abs(n - int(e.get("line") or n)))
                    if _insert_item(Path(r.file), r.id, e, prev, release, new_line):
                        added += 1
                    else:
                        skipped += 1
    finally:
        reader.close()
    out.append(f"-- evidence advanced to {engine} {release}: {added} items added to open-ended rules"
               + (f", {skipped} not placed (multi-line items: add by hand)" if skipped else ""))
    out += [f"    GONE (needs an upper bound or new evidence) {g}" for g in gone]
    return out


def _insert_item(path: Path, rid: str, e: dict[str, Any], prev: str, release: str, line: int) -> bool:
    """Insert, after the rule's one-line evidence item ``e``, the same item at ``release`` / ``line``."""
    import re
    lines = path.read_text().split("\n")
    try:
        start = next(i for i, t in enumerate(lines) if t.strip() == f"- id: {rid}")
    except StopIteration:
        return False
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"\s*- id: ", lines[i])), len(lines))
    rel_pat = re.compile(rf'release: "?{re.escape(prev)}"?([,}}])')
    for i in range(start, end):
        t = lines[i]
        if t.lstrip().startswith("- {") and t.rstrip().endswith("}") and rel_pat.search(t) \
                and f"path: {e['path']}," in t and (e.get("line") is None or re.search(rf"line: {e['line']}\b", t)):
            new = rel_pat.sub(f'release: "{release}"\\1', t, count=1)
            new = re.sub(r"line: \d+", f"line: {line}", new, count=1) if e.get("line") is not None else new
            new = re.sub(r",\s*note: \"(?:[^\"\\\\]|\\\\.)*\"", "", new)  # the note was about the old release
            lines.insert(i + 1, new)
            path.write_text("\n".join(lines))
            return True
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
