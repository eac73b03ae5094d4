"""The engine inputs a release's generated startup checks read, as the launch reader sets them.

``catalog/engines/options/<engine>-inputs.yaml`` (generated from the released wheel, e.g. by
tools/vllm_generated_checks.py) lists per release every input the generated check rows read
(catalog/engines/checks/sites/<engine>-<release>.yaml): its fact name, the options (or the key of a JSON option,
or the environment variable) a user gives it by, the kind of value the engine's parser takes (flag, integer,
number, string, list, json) and the engine's default. An option the flag table (catalog/engines/<engine>.yaml)
does not model is read through this table instead of being listed as ignored, so the generated rows see the
user's value; a JSON option the flag table models gets the generated keys its ``fields`` lack.
"""
from __future__ import annotations

from typing import Any

from kg.core.yamlio import load_yaml

_MEMO: dict[str, tuple[int, dict[str, Any]]] = {}
KINDS = {"flag": "flag", "integer": "integer", "number": "number", "string": "string", "list": "list",
         "json": "json"}


def generated_table(folder: str, name: str, key: str, memo: dict[str, tuple[int, dict[str, Any]]]) -> dict[str, Any] | None:
    """``catalog/engines/<folder>/<name>`` (a table generated from the released wheels) through the content-keyed
    cache (kg.core.cache.built_from under ``key``), remembered in ``memo`` by the file's mtime; None when absent."""
    from kg.core import paths
    f = paths.catalog_dir() / "engines" / folder / name
    if not f.is_file():
        return None
    stamp = f.stat().st_mtime_ns
    if memo.get(key, (None,))[0] != stamp:
        from kg.core import cache
        memo[key] = (stamp, cache.built_from(key, [f], lambda: load_yaml(f).data))
    return memo[key][1]


def release_inputs(engine: str, release: str | None) -> dict[str, dict[str, Any]]:
    """fact -> entry of the release (the newest listed one at or below ``release``; the newest when None);
    {} without a table."""
    data = generated_table("options", f"{engine}-inputs.yaml", f"engine-inputs-{engine}", _MEMO)
    rels = (data or {}).get("releases") or {}
    if not rels:
        return {}
    from kg.core.relcmp import Release
    names = sorted(rels, key=Release)
    pick = names[-1]
    if release:
        try:
            below = [r for r in names if Release(r) <= Release(str(release))]
        except ValueError:  # packaging's InvalidVersion
            below = []
        pick = below[-1] if below else names[0]
    return rels[pick] or {}


def _by_option(inputs: dict[str, dict[str, Any]]) -> tuple[dict[str, tuple[str, dict[str, Any]]],
                                                              dict[str, dict[str, tuple[str, dict[str, Any]]]]]:
    """({option: (fact, entry)} of plain options, {option: {key: (fact, entry)}} of JSON options' keys)."""
    plain: dict[str, tuple[str, dict[str, Any]]] = {}
    keys: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
    for fact, e in inputs.items():
        for o in e.get("options") or []:
            if e.get("key"):
                keys.setdefault(str(o), {})[str(e["key"])] = (fact, e)
            else:
                plain[str(o)] = (fact, e)
    return plain, keys


def option_spec(engine: str, release: str | None, name: str, hand: dict[str, Any] | None) -> dict[str, Any] | None:
    """A flag-table entry for option ``name`` built from the release's inputs: ``hand`` (the flag table's own
    entry) gets the generated keys of a JSON option it does not map; without ``hand``, the generated entry
    (``--no-X`` of a generated flag sets it false). None when the table has nothing for ``name``."""
    inputs = release_inputs(engine, release)
    if not inputs:
        return hand
    plain, keys = _by_option(inputs)
    if hand is not None:
        if hand.get("type") != "json" or not any(n in keys for n in hand.get("names") or []):
            return hand
        gen = {k: (f, e) for n in hand["names"] for k, (f, e) in (keys.get(n) or {}).items()
               if (hand.get("fields") or {}).get(k) != f}
        return {**hand, "generated_fields": gen}
    negated = name.startswith("--no-") and ("--" + name[5:]) in plain and plain["--" + name[5:]][1].get("type") == "flag"
    if negated:
        fact, _ = plain["--" + name[5:]]
        return {"names": [name], "type": "flag", "implies": {fact: False}, "generated": True}
    if name in plain:
        fact, e = plain[name]
        kind = KINDS.get(str(e.get("type")), "string")
        spec: dict[str, Any] = {"names": [name], "set": fact, "generated": True,
                                "type": "string" if kind in ("list",) else kind}
        if kind == "list":
            if e.get("items") != "comma":  # one word split on commas (vLLM's --device-ids), else argparse nargs='+'
                spec["nargs"] = "+"
            spec["as_list"] = e.get("items") or True
        if kind == "json":
            spec["generated_fields"] = dict(keys.get(name) or {})
        if e.get("names"):
            spec["type"] = "string"
            spec["engine_entry"] = e
        return spec
    if name in keys:  # a JSON option the table lists only by its keys (the option itself no row reads)
        return {"names": [name], "type": "json", "generated_fields": dict(keys[name]), "generated": True}
    return None


def env_spec(engine: str, release: str | None, var: str) -> dict[str, Any] | None:
    """{set, type} for an environment variable a generated row reads, or None."""
    for fact, e in release_inputs(engine, release).items():
        if e.get("env") == var:
            return {"set": fact, "type": {"boolean": "boolean", "integer": "integer", "number": "number"}.get(
                str(e.get("type")), "string")}
    return None


def engine_value(entry: dict[str, Any], value: Any) -> Any:
    """A JSON key's (or an enum option's) value as the engine's validator reads it: an enum member name
    (``"VLLM_COMPILE"``) becomes its value (3), a numeric string of an integer input an integer; else as given."""
    names = entry.get("names") or {}
    if isinstance(value, str) and names:
        for k, v in names.items():
            if k.lower() == value.strip().lower():
                return v
        if value.strip().lstrip("-").isdigit():
            return int(value)
    if isinstance(value, str) and entry.get("type") == "integer" and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def list_value(raw: str, items: Any = True) -> list[Any]:
    """The words of an ``nargs='+'`` option as a list, integers as integers; as strings where the engine's parser
    keeps them strings (``items: string``: vLLM's ``list[int | str]`` options, engine/arg_utils.py:248-254 at 0.34.0);
    ``items: comma``: one word split on commas, each stripped, all-digit ones integers (vLLM's --device-ids type,
    engine/arg_utils.py:1209-1215 at 0.34.0, :1195-1200 at 0.33.0)."""
    if items == "string":
        return str(raw).split()
    if items == "comma":
        return [int(p) if p.isdigit() else p for p in (part.strip() for part in str(raw).split(","))]
    out: list[Any] = []
    for w in str(raw).split():
        out.append(int(w) if w.lstrip("-").isdigit() else w)
    return out
