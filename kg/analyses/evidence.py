"""Drift of engine evidence: is each cited snippet still where the rule says, in the released wheel?

Every engine rule (``rules/*.yaml``), engine-table entry (``catalog/engines/*.yaml``) and listed engine check
(``catalog/engines/checks/*.yaml``) carries
``evidence`` items ``{package, release, path, snippet, line?}`` (kg.engine.scope). This module fetches the
wheel of a release with ``pip download <package>==<release> --no-deps`` into a cache folder outside the
repository (default ``$OPTKG_CACHE_DIR/wheels``, else ``~/.cache/optkg/wheels``), opens the cited file inside
the wheel (a zip; nothing is installed, imported or executed) and reports each item:

- ``found``: the snippet is on the recorded line (or, without a recorded line, somewhere in the file);
- ``moved``: the snippet is in the file, on other lines (``lines`` lists them);
- ``gone``: the file is not in the wheel, or the snippet is not in it.

``select_items`` decides what is checked. Without a release every item is checked against its own release.
With ``release`` R (and an engine) the items that claim R are checked against R's wheel: for each fact whose
range contains R, its evidence of the newest recorded release not after R (role ``changed`` items excluded).
R newer than any recorded release therefore checks the newest knowledge against the new wheel: what a new
release broke. Errors: OptkgError (one line) when pip fails or a wheel cannot be read.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from kg.core.errors import OptkgError
from kg.engine.scope import ENGINE_PACKAGES, spec_for

MAX_MEMBER_BYTES = 64 * 1024 * 1024  # a source file larger than this is not read (bounded memory)
PIP_TIMEOUT_S = 1800


@dataclass
class Item:
    """One evidence item and the fact it backs (``owner``: ``rule:<id>`` or ``engine:<engine>:<entry>``)."""

    owner: str
    engine: str
    package: str
    release: str
    path: str
    snippet: str
    line: int | None = None
    role: str = "holds"
    versions: str | None = None  # the fact's release range for this engine
    file: str = ""  # where the item is declared


@dataclass
class Result:
    """One evidence item at the checked release: found, moved (to ``lines``) or gone."""

    item: Item
    checked_release: str
    status: str  # found | moved | gone
    lines: list[int] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        i = self.item
        return {"owner": i.owner, "engine": i.engine, "package": i.package, "recorded_release": i.release,
                "checked_release": self.checked_release, "path": i.path, "snippet": i.snippet, "line": i.line,
                "status": self.status, "lines": self.lines, "note": self.note, "declared_in": i.file}


def _engine_of_package(package: str) -> str:
    norm = package.replace("_", "-").lower()
    for eng, pkg in ENGINE_PACKAGES.items():
        if pkg == norm:
            return eng
    return norm


def items_from_rules(rules: Iterable[Any]) -> list[Item]:
    """Evidence items of loaded rules (kg.engine.rules.Rule objects)."""
    out = []
    for r in rules:
        versions = (r.applies_to or {}).get("versions")
        for e in getattr(r, "evidence", None) or []:
            eng = _engine_of_package(str(e["package"]))
            out.append(Item(f"rule:{r.id}", eng, str(e["package"]), str(e["release"]), str(e["path"]), str(e["snippet"]),
                            e.get("line"), e.get("role", "holds"), spec_for(versions, eng), r.file))
    return out


def items_from_engine_tables(folder: Path) -> list[Item]:
    """Evidence items of ``catalog/engines/<engine>.yaml``: on ``flags`` and ``env`` entries (with ``since``/``until``) and in
    ``defaults_evidence`` ({setting: [items]}) and ``evidence`` ({name: [items]})."""
    from kg.core.yamlio import load_yaml
    out = []
    for f in sorted(Path(folder).glob("*.yaml")):
        d = load_yaml(f).data
        if not isinstance(d, dict):
            continue
        eng = str(d.get("engine") or f.stem)
        entries: list[tuple[str, dict[str, Any], list]] = []
        for i, spec in enumerate(d.get("flags") or []):
            if not isinstance(spec, dict):
                continue
            name = (spec.get("names") or [f"flags[{i}]"])[0]
            if spec.get("evidence"):
                entries.append((f"flag {name}", spec, spec["evidence"]))
            dep = spec.get("deprecated")
            if isinstance(dep, dict) and dep.get("evidence"):
                entries.append((f"flag {name} deprecated", {"since": dep.get("since")}, dep["evidence"]))
        for name, spec in ((d.get("env") or {}).items() if isinstance(d.get("env"), dict) else []):
            if isinstance(spec, dict) and spec.get("evidence"):
                entries.append((f"env {name}", spec, spec["evidence"]))
        facts = d.get("ranged_facts") if isinstance(d.get("ranged_facts"), dict) else {}
        for name, ranged in facts.items():  # {name: [{since, until?, value, evidence}]}
            ranged = ranged if isinstance(ranged, list) else []
            for j, e in enumerate(ranged):
                if isinstance(e, dict) and e.get("evidence"):
                    label = f"fact {name}" + (f"[{j}]" if len(ranged) > 1 else "")
                    entries.append((label, {"since": e.get("since"), "until": e.get("until")}, e["evidence"]))
        for key in ("defaults_evidence", "evidence"):
            table = d.get(key)
            for name, ev in (table.items() if isinstance(table, dict) else []):
                if isinstance(ev, dict) and "evidence" in ev:
                    entries.append((f"{key.split('_')[0]} {name}", ev, ev["evidence"]))
                elif isinstance(ev, list):
                    entries.append((f"{key.split('_')[0]} {name}", {}, ev))
        for label, spec, evs in entries:
            evs = [evs] if isinstance(evs, dict) else list(evs)  # one mapping or a list
            since, until = spec.get("since"), spec.get("until")
            rng = ",".join(x for x in ((f">={since}" if since else ""), (f"<{until}" if until else "")) if x) or None
            for e in evs:
                out.append(Item(f"engine:{eng}:{label}", eng, str(e.get("package") or ENGINE_PACKAGES.get(eng, eng)),
                                str(e["release"]), str(e["path"]),
                                str(e["snippet"]), e.get("line"), e.get("role", "holds"), rng, str(f)))
    return out


def items_from_release_tables(folder: Path) -> list[Item]:
    """Evidence of the per-release defaults in ``catalog/engines/releases/<engine>.yaml`` (``defaults:`` entries
    {setting, value, releases, evidence: [{release, path, line, snippet}]}; the package is the engine's)."""
    from kg.core.yamlio import load_yaml
    out = []
    if not Path(folder).is_dir():
        return out
    for f in sorted(Path(folder).glob("*.yaml")):
        d = load_yaml(f).data
        if not isinstance(d, dict):
            continue
        eng = str(d.get("engine") or f.stem)
        for n, entry in enumerate(d.get("defaults") or []):
            if not isinstance(entry, dict):
                continue
            evs = entry.get("evidence") or []
            for e in ([evs] if isinstance(evs, dict) else evs):
                if not isinstance(e, dict) or not all(k in e for k in ("release", "path", "snippet")):
                    continue
                out.append(Item(f"default:{eng}:{entry.get('setting', n)} {entry.get('releases', '')}".rstrip(), eng,
                                str(e.get("package") or ENGINE_PACKAGES.get(eng, eng)), str(e["release"]), str(e["path"]),
                                str(e["snippet"]), e.get("line"), e.get("role", "holds"), entry.get("releases"), str(f)))
    return out


def items_from_engine_checks(folder: Path) -> list[Item]:
    """Each listed engine check (``catalog/engines/checks/*.yaml``, kg.analyses.enginechecks) as an evidence item."""
    from kg.analyses.enginechecks import load_checks
    out = []
    if not Path(folder).is_dir():
        return out
    for cf in load_checks(folder):
        for c in cf["checks"]:
            # a listed check describes its own release: it claims no other (onboarding a newer release checks
            # that release's own sites file, catalog/engines/checks/sites/)
            out.append(Item(f"check:{c.id}", cf["engine"], cf["package"], cf["release"], c.path, c.snippet, c.line,
                            "holds", f"=={cf['release']}", cf["file"]))
    return out


def _contains(spec: str | None, release: str) -> bool:
    if not spec:
        return True
    try:
        return Version(release) in SpecifierSet(spec)
    except (InvalidVersion, ValueError):
        return False


def select_items(items: list[Item], engine: str | None = None, release: str | None = None) -> list[tuple[Item, str]]:
    """(item, release to check it against) pairs; see the module doc."""
    mine = [i for i in items if engine is None or i.engine == engine]
    if release is None:
        return [(i, i.release) for i in mine]
    if engine is None:
        raise OptkgError("--release needs --engine (a release number belongs to one engine)")
    try:
        want = Version(release)
    except InvalidVersion:
        raise OptkgError(f"--release: '{release}' is not a version number (e.g. 0.33.0)") from None
    out = []
    by_owner: dict[str, list[Item]] = {}
    for i in mine:
        if i.role == "changed" or not _contains(i.versions, release):
            continue
        try:
            if Version(i.release) > want:
                continue
        except InvalidVersion:
            continue
        by_owner.setdefault(i.owner, []).append(i)
    for owner, its in by_owner.items():
        newest = max(Version(i.release) for i in its)
        out.extend((i, release) for i in its if Version(i.release) == newest)
    return out


def _wheel_name_ok(name: str, package: str, release: str) -> bool:
    dist = package.replace("-", "_").lower()
    low = name.lower()
    return low.endswith(".whl") and low.startswith(f"{dist}-{release.lower()}-")


def find_wheel(package: str, release: str, dirs: Iterable[Path]) -> Path | None:
    """A wheel ``<dist>-<release>-*.whl`` in one of ``dirs`` (searched in order, one level deep)."""
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        for cand in sorted(d.iterdir()):
            if cand.is_file() and _wheel_name_ok(cand.name, package, release):
                return cand
            if cand.is_dir() and cand.name.lower().startswith(package.replace("_", "-").lower()):
                for sub in sorted(cand.glob("*.whl")):
                    if _wheel_name_ok(sub.name, package, release):
                        return sub
    return None


def default_cache_dir() -> Path:
    base = os.environ.get("OPTKG_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "optkg") / "wheels"


def fetch_wheel(package: str, release: str, cache_dir: Path, wheel_dirs: Iterable[Path] = (), offline: bool = False) -> Path:
    """The wheel of ``package==release``: from ``wheel_dirs`` or the cache, else ``pip download --no-deps``."""
    cache_dir = Path(cache_dir)
    found = find_wheel(package, release, list(wheel_dirs) + [cache_dir / f"{package}-{release}"])
    if found:
        return found
    if offline:
        raise OptkgError(f"no wheel for {package}=={release} in {', '.join(map(str, list(wheel_dirs) + [cache_dir]))} "
                         "and --offline forbids pip download")
    dest = cache_dir / f"{package}-{release}"
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={release}", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", str(dest)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OptkgError(f"pip download {package}=={release} failed: {e}") from None
    found = find_wheel(package, release, [dest])
    if proc.returncode != 0 or not found:
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no wheel"]
        raise OptkgError(f"pip download {package}=={release} --no-deps failed: {last[0][:200]}")
    return found


class WheelReader:
    """Text of files inside one wheel, read once each (no extraction to disk)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as e:
            raise OptkgError(f"{self.path}: not a readable wheel ({e})") from None
        self._names = set(self._zip.namelist())
        self._cache: dict[str, list[str] | None] = {}

    def lines(self, member: str) -> list[str] | None:
        if member not in self._cache:
            if member not in self._names:
                self._cache[member] = None
            else:
                info = self._zip.getinfo(member)
                if info.file_size > MAX_MEMBER_BYTES:
                    raise OptkgError(f"{self.path}: {member} is {info.file_size} bytes, over the {MAX_MEMBER_BYTES} byte limit")
                self._cache[member] = self._zip.read(member).decode("utf-8", errors="replace").splitlines()
        return self._cache[member]

    def close(self) -> None:
        self._zip.close()


def check_item(item: Item, reader: WheelReader, checked_release: str) -> Result:
    lines = reader.lines(item.path)
    if lines is None:
        return Result(item, checked_release, "gone", [], f"{item.path} is not in {reader.path.name}")
    hits = [n for n, text in enumerate(lines, 1) if item.snippet in text]
    if not hits:
        return Result(item, checked_release, "gone", [], "snippet not in the file")
    if item.line is None or item.line in hits:
        return Result(item, checked_release, "found", hits)
    return Result(item, checked_release, "moved", hits, f"recorded at line {item.line}")


def run(items: list[Item], engine: str | None = None, release: str | None = None, cache_dir: Path | None = None,
        wheel_dirs: Iterable[Path] = (), offline: bool = False) -> list[Result]:
    """Check the selected items; one wheel is fetched and opened per (package, release). Ordered by owner."""
    pairs = select_items(items, engine, release)
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    groups: dict[tuple[str, str], list[Item]] = {}
    for item, rel in pairs:
        groups.setdefault((item.package, rel), []).append(item)
    out: list[Result] = []
    for (package, rel), its in sorted(groups.items()):
        reader = WheelReader(fetch_wheel(package, rel, cache_dir, wheel_dirs, offline))
        try:
            out.extend(check_item(i, reader, rel) for i in its)
        finally:
            reader.close()
    return sorted(out, key=lambda r: (r.item.owner, r.checked_release, r.item.path, r.item.snippet))


def summary(results: list[Result]) -> dict[str, int]:
    counts = {"found": 0, "moved": 0, "gone": 0}
    for r in results:
        counts[r.status] += 1
    return counts
