"""Load and validate the technique catalog.

Input: a catalog folder holding ``axes.yaml``, ``properties.yaml``, ``techniques/*.yaml`` and
``hardware/*.yaml``. Output: a ``Catalog`` (validated techniques, aliases, properties, axes) and
the list of ``Problem`` found, all in one pass. Checks beyond the JSON Schema: id equals file name,
ids unique, aliases unique across the catalog (and never equal to another id), no two entries with
the same name, coupling targets and properties exist, no self-coupling, deprecated entries name an
existing ``replaced_by``, a coupling and its reverse do not contradict each other, no duplicate
YAML keys, no template placeholders left. ``CHECKS`` lists every check with its code, severity,
tags and description (read by ``optkg validate --select/--ignore``, SARIF rule metadata and
``optkg docs``). Every Problem names file, line, column, the field path, what was found, the
valid values (enum values with their descriptions) and a hint.

This module loads; the checks live in kg.knowledge.checks (the registry), kg.knowledge.filechecks
(one file) and kg.knowledge.crosschecks (across files).
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError, Problem
from kg.core.parallel import map_chunks, paused_gc
from kg.core.yamlio import YamlDoc, load_yaml
from kg.knowledge.axes import Axes, load_axes
from kg.knowledge.checks import problem
from kg.knowledge.crosschecks import _condition_problems, _cross_checks, _list
from kg.knowledge.filechecks import (_duplicate_key_problems, _fast_validator, _placeholders,
                                     _schema_problems, _type_word, _yaml_problem)
from kg.knowledge.schema import technique_schema


CACHE_VERSION = 3  # 3: files keyed by their place in the catalog folder, entries move with it


@dataclass
class Catalog:
    """A validated catalog. ``techniques`` maps id -> entry dict (as in the YAML)."""

    root: Path
    axes: Axes
    techniques: dict[str, dict[str, Any]]
    properties: dict[str, dict[str, Any]]
    hardware: dict[str, dict[str, Any]]
    aliases: dict[str, str] = field(default_factory=dict)  # alias (lower-case) -> id
    files: dict[str, str] = field(default_factory=dict)  # id -> file path
    warnings: list[Problem] = field(default_factory=list)  # problems of severity warning (usable catalog)
    drafts: list[str] = field(default_factory=list)  # unfinished templates left out (load_catalog(skip_drafts=True))

    def resolve(self, name: str) -> str | None:
        """Resolve a technique id or alias (case-insensitive) to its id. Ids never die: an old id kept
        as an alias after a rename resolves to the new id (``resolve_note`` says so)."""
        if name in self.techniques:
            return name
        return self.aliases.get(name.lower())

    def resolve_note(self, name: str) -> str | None:
        """A deprecation note when ``name`` is not the current id of a live technique, else None."""
        tid = self.resolve(name)
        if tid is None:
            return None
        t = self.techniques[tid]
        if tid != name:
            return f"'{name}' is an old id or alias of '{tid}'; it still resolves, but write '{tid}'"
        if t.get("status") == "deprecated":
            return f"'{tid}' is deprecated" + (f"; use '{t['replaced_by']}'" if t.get("replaced_by") else "")
        return None

    def without(self, tid: str) -> "Catalog":
        """A shallow copy of the catalog without technique ``tid`` and its aliases (for before/after comparisons)."""
        return Catalog(self.root, self.axes, {k: v for k, v in self.techniques.items() if k != tid}, self.properties,
                       self.hardware, {a: t for a, t in self.aliases.items() if t != tid},
                       {k: v for k, v in self.files.items() if k != tid}, list(self.warnings))

    def technique(self, name: str) -> dict[str, Any]:
        tid = self.resolve(name)
        if tid is None:
            raise OptkgError(f"unknown technique '{name}' (see `optkg matrix` or catalog/techniques/ for ids)")
        return self.techniques[tid]

    def cells(self, tid: str) -> list[tuple[str, str, str]]:
        """Every (stage, layer, dimension) cell the technique occupies: all its stages x its layer span x primary dimension."""
        t = self.techniques[tid]
        c = t["coordinates"]
        return [(s, layer, c["dimension"]) for s in c["stages"] for layer in self.axes.layer_span(c["layers"])]

    def resolve_hardware(self, name: str, memory_gib: Any = None, compute_capability: Any = None,
                         memory_hint: str = "--gpu-memory-gib N (and --gpu-compute-capability X.Y)") -> dict[str, Any]:
        """The catalog entry GPU ``name`` means (kg.knowledge.gpus: ids, aliases, nvidia-smi names); with
        ``memory_gib``, a GPU the catalog lacks is described by it. OptkgError (closest ids, ``memory_hint``)
        for any other name: an unknown GPU is never silently no hardware."""
        from kg.knowledge.gpus import custom_gpu, find_gpu, unknown_gpu_error
        hw, ambiguous = find_gpu(self.hardware, name)
        if hw is not None:
            return hw
        if memory_gib is not None and not ambiguous:
            return custom_gpu(name, memory_gib, compute_capability)
        raise unknown_gpu_error(self.hardware, name, ambiguous, memory_hint)


# ---------------------------------------------------------------------------------------------

def _load_hardware(folder: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    hw: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return hw
    for f in sorted(folder.glob("*.yaml")):
        try:
            d = load_yaml(f).data
        except OptkgError as e:
            problems.append(_yaml_problem(str(f), str(e)))
            continue
        if not isinstance(d, dict) or "id" not in d:
            problems.append(problem(str(f), 1, 1, "id", "hardware file needs a mapping with an id", "hardware"))
            continue
        if not d.get("sources"):
            problems.append(problem(str(f), 1, 1, "sources", "hardware facts need at least one source", "hardware",
                                    hint="add sources: [{title: ..., url: https://...}] (the vendor datasheet)"))
        hw[d["id"]] = d
    return hw


def _load_properties(path: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        doc = load_yaml(path)
    except OptkgError as e:
        problems.append(_yaml_problem(str(path), str(e)))
        return {}
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("properties"), list):
        found = type(doc.data).__name__ if not isinstance(doc.data, dict) else "no 'properties:' list"
        problems.append(problem(str(path), 1, 1, "properties", f"properties.yaml must be a mapping with a 'properties:' "
                                f"list (found {found}); every technique's property references depend on it",
                                "properties", hint="properties: [{id: ..., kind: ..., name: ..., dimension: ..., description: ...}]"))
        return {}
    d = doc.data
    out: dict[str, dict[str, Any]] = {}
    for i, p in enumerate(_list(d.get("properties"))):
        line, col = doc.where(("properties", i))
        if not isinstance(p, dict) or not isinstance(p.get("id"), str):
            problems.append(problem(str(path), line, col, f"properties[{i}]", "property needs an id", "properties",
                                    hint="each property is a mapping with id, kind, name, dimension, description"))
            continue
        if p["id"] in out:
            first, _ = doc.where(("properties", out[p["id"]]["__index"]))
            problems.append(problem(str(path), line, col, f"properties[{i}].id",
                                    f"property id '{p['id']}' is declared twice (first on line {first})", "properties",
                                    found=p["id"], hint="merge the two entries; the second would silently replace the first"))
            continue
        out[p["id"]] = {**p, "__index": i}
    for p in out.values():
        del p["__index"]
    return out


PARALLEL_FROM = 2000  # technique files; below this, starting a worker process costs more than it saves


def _read_techniques(context: tuple[Any, Any], chunk: list[Path]) -> list[tuple[YamlDoc | None, list[Problem]]]:
    """Each technique file of ``chunk`` read and checked on its own: (its document, or None when it is
    not a YAML mapping; its problems: YAML, duplicate keys, schema, placeholders). Runs in worker
    processes for a large catalog (``kg.core.parallel.map_chunks``)."""
    validator, fast = context
    out: list[tuple[YamlDoc | None, list[Problem]]] = []
    for f in chunk:
        try:
            doc = load_yaml(f)
        except OptkgError as e:
            out.append((None, [_yaml_problem(str(f), str(e))]))
            continue
        found = _duplicate_key_problems(doc)
        if not isinstance(doc.data, dict):
            found.append(problem(str(f), 1, 1, "", "a technique file must be a YAML mapping (id: ..., name: ..., ...)",
                                 "schema-type", found=_type_word(doc.data), expected="a mapping",
                                 hint="start from `optkg new <id>`"))
            out.append((None, found))
            continue
        sp = [] if fast(doc.data) else _schema_problems(doc, validator)
        found.extend(sp)
        flagged = {p.path for p in sp}
        found.extend(p for p in _placeholders(doc) if p.path not in flagged)
        out.append((doc, found))
    return out


def _file_digest(files: list[Path], root: Path) -> str:
    """Digest of this cache's version, the modules that shape a Catalog and every file's name inside ``root``
    (kg.core.cache.rooted: a copy of the catalog elsewhere has the same key) and content digest
    (kg.core.cache.file_digest: SHA-256 of its bytes, kept by its stat)."""
    from kg.core.cache import file_digest, rooted
    h = hashlib.sha256()
    h.update(f"optkg-catalog-{CACHE_VERSION}-2".encode())
    here = Path(__file__).parent
    for mod in ("catalog.py", "catalog_cache.py", "checks.py", "filechecks.py", "crosschecks.py", "schema.py", "axes.py"):
        with contextlib.suppress(OSError):  # a changed Catalog shape or check never meets an old entry
            h.update(file_digest(here / mod).encode())
    for f in files:
        h.update(rooted(f, root).encode())
        h.update(b"\0")
        h.update(file_digest(f).encode())
        h.update(b"\0")
    return h.hexdigest()


def _cache_path(root: Path, digest: str) -> Path:
    from kg.core import cache
    return cache.cache_file(f"catalog-{digest[:32]}.json")


def load_catalog(root: Path | None = None, *, only: list[Path] | None = None,
                 use_cache: bool = True, extra: list[Path] | None = None,
                 skip_drafts: bool = False) -> tuple[Catalog, list[Problem]]:
    """Load and validate the catalog at ``root`` (default: the bundled/checkout catalog).

    ``only``: report problems only for these files (cross-file checks still see the whole
    catalog). ``extra``: technique files outside ``<root>/techniques`` to load as if they were in it
    (``optkg place`` on a draft). ``skip_drafts``: leave out technique files that still hold the TODO
    placeholders of ``optkg new`` (with all their problems) and list them in ``catalog.drafts``, so
    commands other than validate/place keep working while an entry is being written; such a catalog
    is not cached. Returns (catalog, problems): ``problems`` holds the errors (empty
    for a usable catalog); warnings (severity ``warning``, see ``CHECKS``) are in
    ``catalog.warnings``. A clean catalog is cached, keyed on the bytes of every file, in
    ``$OPTKG_CACHE_DIR`` (default ``~/.cache/optkg``) so an unchanged catalog is not re-parsed.
    Raises OptkgError when the folder or its axes file is missing.
    """
    root = Path(root) if root else paths.catalog_dir()
    if not (root / "axes.yaml").is_file():
        raise OptkgError(f"{root}: not a catalog folder (no axes.yaml)")
    tech_files = sorted((root / "techniques").glob("*.yaml"))
    if extra:
        have = {f.resolve() for f in tech_files}
        tech_files += [Path(f) for f in extra if Path(f).resolve() not in have]
    other = [root / "axes.yaml", root / "properties.yaml"] + sorted((root / "hardware").glob("*.yaml"))
    all_files = [f for f in other if f.is_file()] + tech_files
    digest = _file_digest(all_files, root)
    cache = _cache_path(root, digest)
    if use_cache and only is None and not extra:
        from kg.core import cache as _cache
        from kg.knowledge.catalog_cache import catalog_from_data
        cached = catalog_from_data(_cache.read_data(cache, "catalog", digest), root, Catalog)  # JSON, checksummed
        if cached is not None:
            return cached, []

    axes = load_axes(root / "axes.yaml")
    problems: list[Problem] = []
    properties = _load_properties(root / "properties.yaml", problems)
    hardware = _load_hardware(root / "hardware", problems)
    import jsonschema  # here: a cached catalog needs no validator (startup time is benchmarked)

    schema = technique_schema(axes)
    validator = jsonschema.Draft202012Validator(schema)
    fast = _fast_validator(schema, len(tech_files))  # same verdict, much faster; messages come from `validator`

    docs: dict[str, YamlDoc] = {}
    techniques: dict[str, dict[str, Any]] = {}
    files: dict[str, str] = {}
    with paused_gc():  # ~240 containers per entry, no cycles: see kg.core.parallel
        read = [r for chunk in map_chunks(_read_techniques, (validator, fast), tech_files, min_items=PARALLEL_FROM)
                for r in chunk]
    for f, (doc, found) in zip(tech_files, read):
        problems.extend(found)
        if doc is None:
            continue
        tid = doc.data.get("id")
        if not isinstance(tid, str):
            continue
        if tid != f.stem:
            line, col = doc.where(("id",))
            problems.append(problem(str(f), line, col, "id", f"id '{tid}' does not match the file name '{f.name}'", "id-filename",
                                    found=tid, expected=f.stem, hint=f"rename the file to {tid}.yaml or set id: {f.stem}"))
        if tid in techniques:
            line, col = doc.where(("id",))
            problems.append(problem(str(f), line, col, "id", f"duplicate id '{tid}' (also in {files[tid]})",
                                    "duplicate-id", found=tid, hint="ids are unique and never reused; pick a new id"))
            continue
        techniques[tid] = doc.data
        docs[tid] = doc
        files[tid] = str(f)

    drafts: list[str] = []
    if skip_drafts:
        drafts = sorted({p.file for p in problems if p.code == "placeholder"})
        gone = set(drafts)
        problems = [p for p in problems if p.file not in gone]
        for tid in [t for t, f in files.items() if f in gone]:
            del techniques[tid], docs[tid], files[tid]
    with paused_gc():  # the cross-file checks build an index per entry: plain data again
        cross = _cross_checks(techniques, docs, properties, hardware) + _condition_problems(techniques, docs, properties)
    if not properties and any(p.file == str(root / "properties.yaml") for p in problems):
        # properties.yaml itself is unreadable or the wrong shape (reported above, once): every coupling
        # through a property would otherwise add a dangling-property error naming the technique files
        cross = [p for p in cross if p.code != "dangling-property"]
    problems.extend(cross)
    aliases = {}
    ids_lower = {x.lower() for x in techniques}  # once, not per alias (quadratic at 10k entries)
    for tid, t in techniques.items():
        for a in _list(t.get("aliases")):
            if isinstance(a, str) and a.lower() not in ids_lower:
                aliases.setdefault(a.lower(), tid)
    if only is not None:
        keep = {str(Path(p)) for p in only} | {str(Path(p).resolve()) for p in only}
        problems = [p for p in problems if p.file in keep or str(Path(p.file).resolve()) in keep]
    problems.sort(key=lambda p: (p.file, p.line, p.column, p.code))
    warnings = [p for p in problems if p.severity != "error"]
    errors = [p for p in problems if p.severity == "error"]
    cat = Catalog(root, axes, techniques, properties, hardware, aliases, files, warnings, drafts)
    if not errors and only is None and not extra and use_cache and not drafts:
        from kg.core import cache as _cache
        from kg.knowledge.catalog_cache import catalog_data
        _cache.write_data(cache, "catalog", digest, catalog_data(cat))  # an unwritable cache folder only costs speed
    return cat, errors
