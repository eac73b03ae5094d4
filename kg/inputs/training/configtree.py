"""Nested YAML training configs as their frameworks compose them: a tree of dotted keys, each leaf with
the ``file:line`` it came from.

- ``defaults:`` inheritance: NeMo-RL's ``defaults: parent.yaml`` (a file, or a list of files, relative to the
  config; the child's keys win, ``key: null`` removes the parent's subtree, nemo_rl/utils/config.py
  load_config_with_inheritance) and Hydra's ``defaults:`` list of ``group: option`` / ``_self_`` entries
  (group files ``<dir>/<group>/<option>.yaml`` placed at ``group``), read when the file is there;
- ``key=value`` overrides on the command line (Hydra / OmegaConf dot-list: ``a.b=3``, ``+a.b=3`` adds,
  ``++a.b=3`` forces, ``~a.b`` deletes; values are YAML scalars);
- ``${a.b}`` interpolations of another key (the whole value, or inside a string), resolved after merging;
  resolvers (``${oc.env:...}``, ``${mul:...}``) leave the value unknown instead of guessed.

``ConfigTree.get(dotted)`` -> the value or None; ``where(dotted)`` -> "file:line: dotted" for messages.
Errors are OptkgError naming the file and line. Bounded: 32 files per chain, 10,000 leaves.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml, parse_yaml

MAX_FILES = 32
MAX_LEAVES = 10_000
_REF = re.compile(r"\$\{([^${}]+)\}")
UNRESOLVED = object()  # a value that depends on a resolver optkg does not run


@dataclass
class ConfigTree:
    """Flattened config: dotted key -> value, and dotted key -> where it was set."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        v = self.values.get(key, default)
        return default if v is UNRESOLVED else v

    def has(self, key: str) -> bool:
        return key in self.values and self.values[key] is not UNRESOLVED

    def where(self, key: str) -> str:
        return f"{self.origin.get(key, self.files[0] if self.files else '<config>')}: {key}"

    def section(self, prefix: str) -> dict[str, Any]:
        """Leaves under ``prefix.`` (keys without the prefix)."""
        p = prefix + "."
        return {k[len(p):]: v for k, v in self.values.items() if k.startswith(p)}

    def top_keys(self) -> set[str]:
        return {k.split(".", 1)[0] for k in self.values}


def _flatten(data: Any, doc, name: str, prefix: tuple = ()) -> tuple[dict[str, Any], dict[str, str]]:
    vals: dict[str, Any] = {}
    orig: dict[str, str] = {}

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, path + (str(k),))
            return
        key = ".".join(path)
        vals[key] = node
        try:
            line = doc.where(path[len(prefix):])[0] if doc is not None else None
        except (KeyError, IndexError, TypeError):
            line = None
        orig[key] = f"{name}:{line}" if line else name
        if len(vals) > MAX_LEAVES:
            raise OptkgError(f"{name}: more than {MAX_LEAVES:,} settings; not a training config")
    walk(data, prefix)
    return vals, orig


def _remove(tree: ConfigTree, key: str) -> None:
    for k in [k for k in tree.values if k == key or k.startswith(key + ".")]:
        tree.values.pop(k)
        tree.origin.pop(k, None)


def _merge(tree: ConfigTree, vals: dict[str, Any], orig: dict[str, str]) -> None:
    for k, v in vals.items():
        # a child's scalar replaces the parent's subtree at that key (null removes it), and a child's subtree
        # replaces a parent's scalar
        _remove(tree, k)
        parts = k.split(".")
        for i in range(1, len(parts)):
            tree.values.pop(".".join(parts[:i]), None)
        tree.values[k] = v
        tree.origin[k] = orig.get(k, "")


def load_tree(path: Path | str, _chain: tuple = ()) -> ConfigTree:
    """Read ``path`` with its ``defaults:`` (see module doc) into a ConfigTree (interpolations resolved)."""
    tree = _load(Path(path), _chain)
    resolve(tree)
    return tree


def _load(p: Path, chain: tuple) -> ConfigTree:
    if len(chain) >= MAX_FILES:
        raise OptkgError(f"{p}: more than {MAX_FILES} files in its defaults chain")
    if str(p.resolve()) in chain:
        raise OptkgError(f"{p}: its defaults chain comes back to itself ({' -> '.join(chain)})")
    doc = load_yaml(p)
    data = doc.data
    if not isinstance(data, dict):
        raise OptkgError(f"{p}:1: a training config is a mapping of settings")
    chain = chain + (str(p.resolve()),)
    tree = ConfigTree(files=[str(p)])
    defaults = data.get("defaults")
    own = {k: v for k, v in data.items() if k != "defaults"}
    parents: list[tuple[Path, tuple]] = []
    if isinstance(defaults, str):
        parents.append((p.parent / defaults, ()))
    elif isinstance(defaults, list):
        for i, d in enumerate(defaults):
            if isinstance(d, str) and d != "_self_":
                parents.append((p.parent / (d if d.endswith(".yaml") else d + ".yaml"), ()))
            elif isinstance(d, dict) and len(d) == 1:
                group, option = next(iter(d.items()))
                group = str(group).split("@", 1)
                target = group[1] if len(group) > 1 else group[0]
                if option is None or str(group[0]).startswith("override "):
                    continue
                f = p.parent / group[0] / f"{option}.yaml"
                parents.append((f, tuple(x for x in target.split(".") if x and x != "_here_")))
    elif defaults is not None:
        raise OptkgError(f"{p}:{doc.where(('defaults',))[0]}: defaults must be a file name or a list")
    for f, at in parents:
        if not f.exists():
            tree.origin.setdefault("_missing_defaults", "")
            tree.values.setdefault("_missing_defaults", [])
            tree.values["_missing_defaults"] = tree.values["_missing_defaults"] + [str(f)]
            continue
        sub = _load(f, chain)
        vals = {(".".join(at) + "." + k if at else k): v for k, v in sub.values.items()}
        orig = {(".".join(at) + "." + k if at else k): v for k, v in sub.origin.items()}
        _merge(tree, vals, orig)
        tree.files += sub.files
    vals, orig = _flatten(own, doc, str(p))
    _merge(tree, vals, orig)
    return tree


def parse_tree(text: str, name: str) -> ConfigTree:
    doc = parse_yaml(text, name)
    if not isinstance(doc.data, dict):
        raise OptkgError(f"{name}:1: a training config is a mapping of settings")
    vals, orig = _flatten(doc.data, doc, name)
    tree = ConfigTree(vals, orig, [name])
    resolve(tree)
    return tree


def apply_overrides(tree: ConfigTree, items: list[str], where: str) -> list[str]:
    """Apply ``key=value`` overrides (Hydra dot-list); returns the tokens that are not overrides."""
    rest = []
    for t in items:
        if t.startswith("~"):
            _remove(tree, t[1:].split("=", 1)[0])
            continue
        if "=" not in t or t.startswith("-"):
            rest.append(t)
            continue
        k, v = t.split("=", 1)
        k = k.lstrip("+")
        if not re.fullmatch(r"[A-Za-z_][\w.@/-]*", k):
            rest.append(t)
            continue
        try:
            val = parse_yaml(v, where).data if v.strip() else ""
        except OptkgError:
            val = v
        vals, _ = _flatten(val, None, where, tuple(k.split("."))) if isinstance(val, dict) else ({k: val}, {})
        _merge(tree, vals, {x: f"{where}: {t}" for x in vals})
    resolve(tree)
    return rest


def resolve(tree: ConfigTree) -> None:
    """Replace ``${a.b}`` references by the referenced value (up to 20 rounds for chains)."""
    for _ in range(20):
        changed = False
        for k, v in list(tree.values.items()):
            if not isinstance(v, str) or "${" not in v:
                continue
            m = _REF.fullmatch(v.strip())
            if m:
                tree.values[k] = _lookup(tree, k, m.group(1).strip())
                changed = True
                continue
            def sub(mm: re.Match, k=k) -> str:
                val = _lookup(tree, k, mm.group(1).strip())
                if val is UNRESOLVED or (isinstance(val, str) and "${" in val):
                    raise KeyError(ref)
                return str(val)
            try:
                tree.values[k] = _REF.sub(sub, v)
            except KeyError:
                tree.values[k] = UNRESOLVED
            changed = True
        if not changed:
            return


def _lookup(tree: ConfigTree, key: str, ref: str) -> Any:
    """The value ``${ref}`` stands for at ``key``: a key (absolute, or ``.sibling`` relative to ``key``'s
    parent) or OmegaConf's ``oc.select:key,default``; UNRESOLVED for other resolvers and missing keys."""
    default: Any = UNRESOLVED
    if ref.startswith("oc.select:"):
        body = ref[len("oc.select:"):]
        ref, _, dflt = body.partition(",")
        if _:
            try:
                default = parse_yaml(dflt.strip(), key).data if dflt.strip() else None
            except OptkgError:
                default = dflt.strip()
    elif ":" in ref:
        return UNRESOLVED
    ref = ref.strip()
    if ref.startswith("."):
        parent = key.rsplit(".", 1)[0] if "." in key else ""
        ref = f"{parent}.{ref[1:]}" if parent else ref[1:]
    return tree.values.get(ref, default)


def apply_table(job: Any, tree: ConfigTree, table: dict[str, Any]) -> list[str]:
    """Set ``job``'s settings from ``tree`` through ``table`` (dotted key -> setting, or -> (setting, fn) where
    ``fn(value)`` converts; a None from fn leaves the setting unset). Returns the keys read."""
    read = []
    for key, target in table.items():
        if not tree.has(key):
            continue
        val = tree.get(key)
        setting, fn = (target, None) if isinstance(target, str) else target
        if fn is not None:
            val = fn(val)
        if val is None or val == "" or val == "auto":
            continue
        job.set(setting, val, tree.where(key))
        read.append(key)
    return read

