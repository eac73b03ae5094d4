"""Load and validate the technique catalog.

Input: a catalog folder holding ``axes.yaml``, ``properties.yaml``, ``techniques/*.yaml`` and
``hardware/*.yaml``. Output: a ``Catalog`` (validated techniques, aliases, properties, axes) and
the list of ``Problem`` found, all in one pass. Checks beyond the JSON Schema: id equals file name,
ids unique, aliases unique across the catalog (and never equal to another id), no two entries with
the same name, coupling targets and properties exist, no self-coupling, deprecated entries name an
existing ``replaced_by``, a coupling and its reverse do not contradict each other.
"""
from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import jsonschema

from . import paths
from .axes import Axes, load_axes
from .errors import OptkgError, Problem
from .schema import technique_schema
from .yamlio import YamlDoc, load_yaml

CACHE_VERSION = 1


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

    def resolve(self, name: str) -> str | None:
        """Resolve a technique id or alias (case-insensitive) to its id, following ``replaced_by``-free renames."""
        if name in self.techniques:
            return name
        return self.aliases.get(name.lower())

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

    def resolve_hardware(self, name: str) -> dict[str, Any]:
        key = name.lower()
        for hid, hw in self.hardware.items():
            if hid.lower() == key or key in (a.lower() for a in hw.get("aliases", [])):
                return hw
        known = ", ".join(sorted(self.hardware))
        raise OptkgError(f"unknown GPU '{name}'; known: {known} (add catalog/hardware/<id>.yaml)")


# ---------------------------------------------------------------------------------------------
# schema problems -> teaching messages

def _valid_values(schema: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    if "oneOf" in schema and all("const" in s for s in schema["oneOf"]):
        return tuple((str(s["const"]), s.get("description", "")) for s in schema["oneOf"])
    if "enum" in schema:
        return tuple((str(v), "") for v in schema["enum"])
    return ()


def _schema_problems(doc: YamlDoc, validator: jsonschema.protocols.Validator) -> list[Problem]:
    out = []
    for err in validator.iter_errors(doc.data):
        # descend into oneOf enum failures so the message names the field, not the combinator
        path = tuple(err.absolute_path)
        line, col = doc.where(path)
        fpath = _fmt_path(path)
        vv = _valid_values(err.schema) if isinstance(err.schema, dict) else ()
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {}))) if isinstance(err.instance, dict) else []
            for key in extra or ["?"]:
                kl, kc = doc.where(path + (key,))
                allowed = ", ".join(sorted(err.schema.get("properties", {})))
                out.append(Problem(doc.path, kl, kc, _fmt_path(path + (key,)), f"unknown field '{key}'", "schema",
                                   found=key, expected=f"one of: {allowed}",
                                   hint="check the spelling; the schema allows no other fields"))
            continue
        if err.validator == "oneOf" and vv:
            msg = f"{err.instance!r} is not a valid value"
            hint = "choose one of the listed values"
        elif err.validator == "required":
            msg = err.message
            hint = "add the field (see catalog/schema/technique.schema.json for its shape)"
        elif err.validator == "oneOf" and err.schema.get("oneOf") and all("required" in s for s in err.schema["oneOf"]):
            keys = [s["required"][0] for s in err.schema["oneOf"]]
            msg = f"needs exactly one of: {', '.join(keys)}"
            hint = "a coupling points at a technique (target) or at a property, not both"
        else:
            msg = err.message if len(err.message) < 200 else err.message[:197] + "..."
            hint = ""
        out.append(Problem(doc.path, line, col, fpath, msg, "schema", found=_short(err.instance),
                           expected=str(err.schema.get("description", "")) if isinstance(err.schema, dict) else "",
                           hint=hint, valid_values=vv))
    return out


def _short(v: Any) -> Any:
    s = repr(v)
    return v if len(s) <= 80 else s[:77] + "..."


def _fmt_path(path: Iterable[Any]) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


# ---------------------------------------------------------------------------------------------

def _load_hardware(folder: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    hw: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return hw
    for f in sorted(folder.glob("*.yaml")):
        try:
            d = load_yaml(f).data
        except OptkgError as e:
            problems.append(Problem(str(f), 1, 1, "", str(e), "yaml"))
            continue
        if not isinstance(d, dict) or "id" not in d:
            problems.append(Problem(str(f), 1, 1, "id", "hardware file needs a mapping with an id", "hardware"))
            continue
        if not d.get("sources"):
            problems.append(Problem(str(f), 1, 1, "sources", "hardware facts need at least one source", "hardware"))
        hw[d["id"]] = d
    return hw


def _load_properties(path: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        d = load_yaml(path).data or {}
    except OptkgError as e:
        problems.append(Problem(str(path), 1, 1, "", str(e), "yaml"))
        return {}
    out = {}
    for i, p in enumerate(d.get("properties") or []):
        if not isinstance(p, dict) or "id" not in p:
            problems.append(Problem(str(path), 1, 1, f"properties[{i}]", "property needs an id", "properties"))
            continue
        out[p["id"]] = p
    return out


def _file_digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    h.update(f"optkg-catalog-{CACHE_VERSION}".encode())
    for f in files:
        h.update(str(f).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _cache_path(root: Path, digest: str) -> Path:
    import os
    base = Path(os.environ.get("OPTKG_CACHE_DIR") or (Path.home() / ".cache" / "optkg"))
    return base / f"catalog-{digest[:32]}.pickle"


def load_catalog(root: Path | None = None, *, only: list[Path] | None = None,
                 use_cache: bool = True) -> tuple[Catalog, list[Problem]]:
    """Load and validate the catalog at ``root`` (default: the bundled/checkout catalog).

    ``only``: report problems only for these technique files (cross-file checks still see the
    whole catalog). Returns (catalog, problems); problems is empty for a clean catalog. A
    validated clean catalog is cached, keyed on the bytes of every file, in ``$OPTKG_CACHE_DIR``
    (default ``~/.cache/optkg``) so an unchanged catalog is not re-parsed.
    Raises OptkgError when the folder or its axes file is missing.
    """
    root = Path(root) if root else paths.catalog_dir()
    if not (root / "axes.yaml").is_file():
        raise OptkgError(f"{root}: not a catalog folder (no axes.yaml)")
    tech_files = sorted((root / "techniques").glob("*.yaml"))
    other = [root / "axes.yaml", root / "properties.yaml"] + sorted((root / "hardware").glob("*.yaml"))
    all_files = [f for f in other if f.is_file()] + tech_files
    digest = _file_digest(all_files)
    cache = _cache_path(root, digest)
    if use_cache and only is None and cache.is_file():
        try:
            with cache.open("rb") as fh:
                cat = pickle.load(fh)
            if isinstance(cat, Catalog):
                cat.root = root
                return cat, []
        except Exception:  # a corrupt cache is just a miss
            cache.unlink(missing_ok=True)

    axes = load_axes(root / "axes.yaml")
    problems: list[Problem] = []
    properties = _load_properties(root / "properties.yaml", problems)
    hardware = _load_hardware(root / "hardware", problems)
    validator = jsonschema.Draft202012Validator(technique_schema(axes))

    docs: dict[str, YamlDoc] = {}
    techniques: dict[str, dict[str, Any]] = {}
    files: dict[str, str] = {}
    for f in tech_files:
        try:
            doc = load_yaml(f)
        except OptkgError as e:
            msg = str(e)
            line = 1
            rest = msg[len(str(f)) + 1:] if msg.startswith(str(f) + ":") else msg
            head = rest.split(":", 1)[0]
            if head.isdigit():
                line = int(head)
            problems.append(Problem(str(f), line, 1, "", msg.split(": ", 1)[-1] if ":" in msg else msg, "yaml"))
            continue
        if not isinstance(doc.data, dict):
            problems.append(Problem(str(f), 1, 1, "", "a technique file must be a YAML mapping", "schema",
                                    found=type(doc.data).__name__))
            continue
        problems.extend(_schema_problems(doc, validator))
        tid = doc.data.get("id")
        if not isinstance(tid, str):
            continue
        if tid != f.stem:
            line, col = doc.where(("id",))
            problems.append(Problem(str(f), line, col, "id", f"id '{tid}' does not match the file name", "id-filename",
                                    found=tid, expected=f.stem, hint=f"rename the file to {tid}.yaml or set id: {f.stem}"))
        if tid in techniques:
            line, col = doc.where(("id",))
            problems.append(Problem(str(f), line, col, "id", f"duplicate id '{tid}' (also in {files[tid]})",
                                    "duplicate-id", found=tid, hint="ids are unique and never reused"))
            continue
        techniques[tid] = doc.data
        docs[tid] = doc
        files[tid] = str(f)

    problems.extend(_cross_checks(techniques, docs, properties, hardware))
    aliases = {}
    for tid, t in techniques.items():
        for a in t.get("aliases") or []:
            if isinstance(a, str):
                aliases.setdefault(a.lower(), tid)
    cat = Catalog(root, axes, techniques, properties, hardware, aliases, files)
    if only is not None:
        keep = {str(Path(p)) for p in only} | {str(Path(p).resolve()) for p in only}
        problems = [p for p in problems if p.file in keep or str(Path(p.file).resolve()) in keep]
    if not problems and only is None and use_cache:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            import os, tempfile
            fd, tmp = tempfile.mkstemp(dir=cache.parent)
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(cat, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, cache)
        except OSError:  # an unwritable cache folder only costs speed
            cache = None
    problems.sort(key=lambda p: (p.file, p.line, p.column, p.code))
    return cat, problems


_CONTRADICTS = {("requires", "conflicts_with"), ("conflicts_with", "requires"),
                ("mitigates", "amplifies"), ("amplifies", "mitigates")}


def _cross_checks(techniques: dict[str, dict[str, Any]], docs: dict[str, YamlDoc],
                  properties: dict[str, Any], hardware: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    alias_owner: dict[str, str] = {}
    name_owner: dict[str, str] = {}
    ids_lower = {t.lower(): t for t in techniques}
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        name = str(t.get("name", "")).strip().lower()
        if name:
            if name in name_owner:
                line, col = doc.where(("name",))
                out.append(Problem(doc.path, line, col, "name", f"name '{t['name']}' is also used by '{name_owner[name]}'",
                                   "duplicate-name", found=t["name"], hint="two entries with one name are one technique: merge them"))
            else:
                name_owner[name] = tid
        for i, a in enumerate(t.get("aliases") or []):
            if not isinstance(a, str):
                continue
            key = a.lower()
            line, col = doc.where(("aliases", i))
            if key in ids_lower and ids_lower[key] != tid:
                out.append(Problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is the id of another technique",
                                   "alias-clash", found=a, hint="an alias must not shadow an id"))
            elif key in alias_owner and alias_owner[key] != tid:
                out.append(Problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is also an alias of '{alias_owner[key]}'",
                                   "duplicate-alias", found=a, hint="aliases are unique across the catalog"))
            else:
                alias_owner[key] = tid
    resolvable = set(techniques) | set(alias_owner)
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        if t.get("status") == "deprecated" and t.get("replaced_by"):
            rb = t["replaced_by"]
            if rb not in techniques:
                line, col = doc.where(("replaced_by",))
                out.append(Problem(doc.path, line, col, "replaced_by", f"replaced_by '{rb}' is not a technique id",
                                   "dangling-replaced-by", found=rb))
        for i, c in enumerate(t.get("couplings") or []):
            if not isinstance(c, dict):
                continue
            tgt = c.get("target")
            if isinstance(tgt, str):
                line, col = doc.where(("couplings", i, "target"))
                if tgt == tid or alias_owner.get(tgt.lower()) == tid:
                    out.append(Problem(doc.path, line, col, f"couplings[{i}].target", "a technique cannot couple with itself",
                                       "self-coupling", found=tgt))
                elif tgt not in resolvable and tgt.lower() not in alias_owner:
                    near = sorted(x for x in techniques if x.split("-")[0] == tgt.split("-")[0])[:5]
                    out.append(Problem(doc.path, line, col, f"couplings[{i}].target", f"coupling target '{tgt}' does not exist",
                                       "dangling-target", found=tgt, expected="an existing technique id or alias",
                                       hint=("did you mean: " + ", ".join(near)) if near else "add the technique first, or fix the id"))
            prop = c.get("property")
            if isinstance(prop, str) and prop not in properties:
                line, col = doc.where(("couplings", i, "property"))
                out.append(Problem(doc.path, line, col, f"couplings[{i}].property", f"property '{prop}' is not in properties.yaml",
                                   "dangling-property", found=prop, hint="add it to catalog/properties.yaml with a description"))
    # a coupling and its reverse must not contradict each other
    kinds: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for tid, t in techniques.items():
        for i, c in enumerate(t.get("couplings") or []):
            if isinstance(c, dict) and isinstance(c.get("target"), str):
                tgt = c["target"] if c["target"] in techniques else alias_owner.get(c["target"].lower(), c["target"])
                kinds.setdefault((tid, tgt), []).append((c.get("kind"), i))
    for (a, b), ks in sorted(kinds.items()):
        for k1, i in ks:
            for k2, _ in kinds.get((b, a), []):
                if (k1, k2) in _CONTRADICTS and not techniques[a]["couplings"][i].get("condition"):
                    doc = docs[a]
                    line, col = doc.where(("couplings", i, "kind"))
                    out.append(Problem(doc.path, line, col, f"couplings[{i}].kind",
                                       f"'{a}' {k1} '{b}' but '{b}' {k2} '{a}'", "contradicting-couplings",
                                       found=k1, hint="add a condition that separates the two cases, or fix one side"))
    return out
