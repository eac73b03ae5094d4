"""TensorRT-LLM launch commands: ``trtllm-serve [serve] <model> ...`` and the LLM-API YAML they name.

Flags come from ``catalog/engines/trtllm.yaml`` (click options of ``trtllm-serve serve``: exact
names, no abbreviations). ``--extra_llm_api_options FILE`` / ``--config FILE`` is read relative to
the launch's working directory; its keys (the table's ``llm_api`` map, nested keys dotted such as
``kv_cache_config.dtype``) override the flags, as ``update_llm_args_with_extra_dict`` does in
``tensorrt_llm/commands/serve.py``. Keys optkg does not model are listed as ignored with file:line.
A bare LLM-API YAML file (``optkg check extra.yaml``) is read with :func:`stack_from_llm_api`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import YamlDoc, load_yaml
from kg.inputs.launch.argv import apply_flag, finish, parse_words, table_for
from kg.inputs.launch.files import STACK_KEYS
from kg.inputs.launch.registry import FileFormat, Launch, apply_context, resolve_file
from kg.inputs.modelcfg import load_config_file, resolve_model
from kg.inputs.stack import MAX_PARALLEL_SIZE, PARALLEL_DEFAULTS, Stack, _coerce, add_technique
from kg.knowledge.catalog import Catalog

ENGINE = "trtllm"
CONFIG_FLAGS = ("--extra_llm_api_options", "--config")


def _flatten(d: dict[str, Any], prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    out: list[tuple[tuple, Any]] = []
    for k, v in d.items():
        path = prefix + (str(k),)
        if isinstance(v, dict) and v:
            out += _flatten(v, path)
        else:
            out.append((path, v))
    return out


def apply_llm_api(st: Stack, doc: YamlDoc, catalog: Catalog, removed: set[str]) -> str | None:
    """Apply an LLM-API YAML document's modelled keys to ``st``; return its ``model`` if it names one.

    Raises OptkgError '<file>:<line>: <key>: expected ...' for a bad value, or for a file that is not a mapping.
    """
    if not isinstance(doc.data, dict):
        raise OptkgError(f"{doc.path}:1: a TensorRT-LLM LLM-API YAML must be a mapping of LlmArgs fields")
    table = table_for(ENGINE, doc.path)
    keys: dict[str, dict[str, Any]] = table.get("llm_api") or {}
    model = None
    for path, value in _flatten(doc.data):
        key = ".".join(path)
        where = f"{doc.path}:{doc.where(path)[0]}: {key}"
        if key == "model" and isinstance(value, str):
            model = value
            continue
        spec = keys.get(key)
        if spec is None:
            st.ignored.append(f"{key}: {value!r} ({doc.path}:{doc.where(path)[0]})")
            continue
        typ = spec["type"]
        hi = spec.get("maximum")
        if spec.get("set") in PARALLEL_DEFAULTS:
            hi = MAX_PARALLEL_SIZE if hi is None else min(hi, MAX_PARALLEL_SIZE)
        v = _coerce(value, "boolean" if typ == "flag" else typ, where, spec.get("minimum"), hi)
        if spec.get("set") == "kv_cache_dtype" and isinstance(v, str):
            v = v.lower()
        apply_flag(st, catalog, ENGINE, spec, v, where, removed, origin=f"{doc.path}:{doc.where(path)[0]}")
        if typ == "flag" and v is False and spec.get("set"):
            st.settings[spec["set"]] = False
    return model


def read_launch(launch: Launch) -> Stack:
    """A Stack from a detected ``trtllm-serve`` launch (flags, then the LLM-API YAML over them)."""
    args = list(launch.args)
    cfg_path = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        name, eq, inline = args[i].partition("=")
        if name in CONFIG_FLAGS:
            if eq:
                cfg_path, i = inline, i + 1
            elif i + 1 < len(args):
                cfg_path, i = args[i + 1], i + 2
            else:
                raise OptkgError(f"{launch.label} {name}: expects a YAML file")
            continue
        rest.append(args[i])
        i += 1
    doc = load_yaml(resolve_file(cfg_path, launch)) if cfg_path else None
    model_from = None
    if doc is not None and isinstance(doc.data, dict) and isinstance(doc.data.get("model"), str):
        model_from = doc.data["model"]
    st = parse_words(rest, launch.catalog, ENGINE, label=launch.label, env=launch.env, launch=launch.prefix,
                     model_override=launch.model_override, resolver=launch.resolver or resolve_model,
                     model_from=model_from)
    if doc is not None:
        removed: set[str] = set()
        apply_llm_api(st, doc, launch.catalog, removed)
        finish(st, launch.catalog, removed)
        st.notes.append(f"{launch.label}: read the LLM-API options in {doc.path} (they override the flags)")
    return apply_context(st, launch)


def stack_from_llm_api(doc: YamlDoc, catalog: Catalog, model_override: str | None = None,
                       resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """A Stack from a TensorRT-LLM LLM-API YAML file on its own (engine defaults, then the file's keys).

    The model comes from the file's ``model:`` or ``model_override``; OptkgError when neither names one.
    """
    table = table_for(ENGINE, doc.path)
    st = Stack(name=Path(doc.path).stem, model=None, engine=ENGINE, source=doc.path)
    for tid in table.get("default_techniques") or []:
        if catalog.resolve(tid):
            add_technique(st, catalog, tid, None, doc.path)
    st.settings.update(table.get("defaults") or {})
    removed: set[str] = set()
    model = apply_llm_api(st, doc, catalog, removed)
    finish(st, catalog, removed)
    target = model_override or model
    if target is None:
        raise OptkgError(f"{doc.path}:1: the LLM-API YAML names no model (add `model:` or pass --config path/to/config.json)")
    st.model = load_config_file(target) if model_override else resolver(target)
    return st


def _llm_api_keys() -> set[str]:
    return {k.split(".")[0] for k in (table_for(ENGINE, ENGINE).get("llm_api") or {})} | {
        "kv_cache_config", "cuda_graph_config", "build_config", "backend", "speculative_config",
        "disable_overlap_scheduler", "print_iter_log", "moe_config", "attn_backend", "cache_transceiver_config"}


def is_llm_api_file(docs: list) -> bool:
    """One YAML document with top-level keys of the LLM API (``kv_cache_config`` ...) and none of an optkg stack
    file's (``model`` may be in both)."""
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        return False
    keys = set(map(str, docs[0].data))
    return bool(keys & _llm_api_keys()) and not (keys - {"model"}) & STACK_KEYS


LLM_API_FILE = FileFormat(name="trtllm-llm-api", detects=is_llm_api_file, read=stack_from_llm_api)
