"""Shared argv handling for launch commands: split a pasted command into words, find the program,
and read the engine's flags with its flag table (``catalog/engines/<engine>.yaml``).

Every engine parser (``kg.inputs.launch.vllm``, ``...sglang``, ``...trtllm``, ``...lmdeploy``) uses
``parse_words``; an engine module only says which table, which label and how its own files (vLLM
``--config``, TensorRT-LLM ``--extra_llm_api_options``) turn into words. Words are split with
:func:`shlex.split` (POSIX rules, backslash-newline continuations joined first).

Flag spellings follow the engine's own parser, as the table's ``spelling`` block says (with the
source line that shows it): ``underscores: dashes`` (vLLM's FlexibleArgumentParser rewrites ``_``
to ``-`` in a ``--`` name before argparse sees it), ``abbreviations: true`` (argparse's default
``allow_abbrev``: a unique prefix of a known option stands for it; the candidates are the table's
``options`` list when it has one, else every name the table knows), ``=value`` always. A flag
given twice keeps its last value (argparse stores in order), and the technique it implies follows
that last value.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.engine.expr import evaluate
from kg.inputs.modelcfg import load_config_file, resolve_model
from kg.inputs.stack import (BASE_SETTINGS, MAX_PARALLEL_SIZE, PARALLEL_DEFAULTS, Stack, _coerce, _engine_tables,
                             _param_specs, add_technique, check_kv_cache_dtype)
from kg.knowledge.catalog import Catalog

ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")


def tokens(command: str) -> list[str]:
    """The words of ``command`` (shlex, POSIX); OptkgError on an unbalanced quote."""
    text = command.replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        return shlex.split(text)
    except ValueError as e:
        raise OptkgError(f"command: cannot split it into words ({e})") from None


def program_word(w: str) -> str:
    """A program word as the tables spell it: basename, python3.11 -> python."""
    b = os.path.basename(w)
    return "python" if _PYTHON.fullmatch(b) else b


def split_launch(words: list[str], table: dict[str, Any]) -> tuple[list[str], list[str], list[str], bool]:
    """(environment assignments, launcher words, the engine's arguments, program found).

    The program (``vllm serve``, ``python -m sglang.launch_server``, ...) may follow ``VAR=value``
    assignments, ``env [VAR=value ...]`` and launchers such as ``uv run`` or ``nohup`` (the table's
    ``launchers``); without a program the words are a bare argument list.
    """
    progs = sorted((list(map(str, p)) for p in table["programs"]), key=len, reverse=True)
    norm = [program_word(w) for w in words]
    for i in range(len(words)):
        for prog in progs:
            if norm[i:i + len(prog)] == [program_word(x) for x in prog]:
                prefix = words[:i]
                env = [w for w in prefix if ASSIGN.fullmatch(w)]
                launch = [w for w in prefix if not ASSIGN.fullmatch(w)]
                return env, launch, words[i + len(prog):], True
    env = []
    rest = list(words)
    while rest and (ASSIGN.fullmatch(rest[0]) or rest[0] == "env"):
        w = rest.pop(0)
        if w != "env":
            env.append(w)
    return env, [], rest, False



def table_for(engine: str, label: str) -> dict[str, Any]:
    """The flag table of ``engine`` (``catalog/engines/<engine>.yaml``); OptkgError when it has no programs."""
    tables = _engine_tables()
    if engine not in tables or not tables[engine].get("programs"):
        raise OptkgError(f"{label}: no flag table for engine '{engine}'")
    return tables[engine]


def _flag_index(table: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], set[str], list[str]]:
    """(flag name -> spec, value-less names, every option name the table knows for prefix matching)."""
    by_name: dict[str, dict[str, Any]] = {}
    for spec in table["flags"]:
        for n in spec["names"]:
            by_name[n] = spec
    valueless = {str(f) for f in table.get("boolean_flags") or []}
    options = [str(o) for o in (table.get("options") or [])]
    known = sorted(set(by_name) | valueless | set(options))
    return by_name, valueless, known


def canonical_flag(name: str, table: dict[str, Any], known: list[str]) -> tuple[str, str | None]:
    """(the name the engine's parser resolves ``name`` to, a note or None).

    Applies the table's ``spelling`` rules (see the module doc). A prefix that matches several
    options is left as typed, with a note that the engine refuses it as ambiguous.
    """
    sp = table.get("spelling") or {}
    out = name
    if sp.get("underscores") == "dashes" and out.startswith("--"):
        head, dot, tail = out[2:].partition(".")
        out = "--" + head.replace("_", "-") + dot + tail
    if out in known or not sp.get("abbreviations") or not out.startswith("--") or len(out) < 3:
        return out, None
    cands = [k for k in known if k.startswith("--") and k.startswith(out)]
    if len(cands) == 1:
        return cands[0], f"{name} is an abbreviation of {cands[0]} (the parser accepts unique prefixes)"
    if len(cands) > 1:
        shown = ", ".join(cands[:6]) + (" ..." if len(cands) > 6 else "")
        return out, f"{name} is ambiguous (could match {shown}): the engine's parser refuses it"
    return out, None


def parse_words(words: list[str], catalog: Catalog, engine: str, *, label: str,
                env: dict[str, str] | None = None, launch: list[str] | None = None,
                model_override: str | None = None, resolver: Callable[[str], Any] = resolve_model,
                model_from: str | None = None) -> Stack:
    """Build a Stack from ``words`` (the engine's arguments, program already removed).

    ``env``: environment assignments the command sets (read where the table's ``env`` models them:
    ``CUDA_VISIBLE_DEVICES`` sets the GPU count; the rest are listed as ignored). ``launch``:
    words before the program (``uv run``, ``nohup``; noted unless the table's ``launchers`` knows
    them). Flags the table does not model go to ``Stack.ignored``; value-less ones (the table's
    ``boolean_flags``, any ``--no-*``) never take the next word. ``--flag=false`` turns a flag off.
    ``model_from``: a model found outside the words (an LLM-API YAML), used when the words name none.
    Raises OptkgError naming the flag and what was expected.
    """
    table = table_for(engine, label)
    by_name, valueless, known = _flag_index(table)
    env = dict(env or {})
    st = Stack(name=f"{engine} command", model=None, engine=engine, source=label)
    known_launch = [list(map(str, x)) for x in table.get("launchers") or []]
    if launch:
        words_l = [program_word(w) for w in launch if w != "env"]
        if words_l and not any(words_l[:len(k)] == k for k in known_launch):
            st.notes.append(f"{label}: skipped the words before the {engine} program: {' '.join(launch)}")
    for tid in table.get("default_techniques") or []:
        if catalog.resolve(tid):
            add_technique(st, catalog, tid, None, label)
    for k, v in (table.get("defaults") or {}).items():
        st.settings[k] = v
    by_value_tids = {t for spec in table["flags"] for t in (spec.get("technique_by_value") or {}).values()}
    removed: set[str] = set()
    model_name = None
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "-":
            if table.get("positional_model") and model_name is None:
                model_name = w
                st.origins["model"] = w
            else:
                st.ignored.append(w)
            i += 1
            continue
        typed, eq, inline = w.partition("=")
        name, note = canonical_flag(typed, table, known)
        if note:
            st.notes.append(f"{label}: {note}")
        spec = by_name.get(name)
        field_path = None
        if spec is None and "." in name and (table.get("spelling") or {}).get("json_dots"):
            base, _, field_path = name.partition(".")
            base, _ = canonical_flag(base, table, known)
            spec = by_name.get(base) if by_name.get(base, {}).get("type") == "json" else None
            if spec is not None:
                name = base
        if spec is None:
            # unknown flag: keep it and its value (if it takes one and the next word is not a flag)
            takes_value = name not in valueless and not name.startswith("--no-")
            if takes_value and not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                st.ignored.append(f"{w} {words[i + 1]}")
                i += 2
            else:
                st.ignored.append(w)
                i += 1
            continue
        typ = spec["type"]
        flag = f"{label} {typed}"
        if typ == "flag":
            value: Any = True
            if eq:
                value = _coerce(inline, "boolean", flag)
            i += 1
        else:
            if eq:
                raw = inline
                i += 1
            else:
                if i + 1 >= len(words):
                    raise OptkgError(f"{flag}: expects a value")
                raw = words[i + 1]
                i += 2
            if typ == "json" and field_path is not None:
                value = dict(st.settings.get(spec.get("set"), {}) or {}) if spec.get("set") else {}
                try:
                    value[field_path] = json.loads(raw)
                except json.JSONDecodeError:
                    value[field_path] = raw
            elif typ == "json":
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError as e:
                    raise OptkgError(f"{flag}: invalid JSON ({e.msg} at column {e.colno})") from None
                if not isinstance(value, dict):
                    raise OptkgError(f"{flag}: expected a JSON object, found {raw!r}")
            else:
                hi = spec.get("maximum")
                if spec.get("set") in PARALLEL_DEFAULTS:
                    hi = MAX_PARALLEL_SIZE if hi is None else min(hi, MAX_PARALLEL_SIZE)
                value = _coerce(raw, typ, flag, spec.get("minimum"), hi)
            if spec.get("value_map"):
                vm = {str(k).lower(): v for k, v in spec["value_map"].items()}
                if str(value).lower() not in vm:
                    raise OptkgError(f"{flag}: expected one of {', '.join(map(str, spec['value_map']))}, found {raw!r}")
                value = vm[str(value).lower()]
        apply_flag(st, catalog, engine, spec, value, flag, removed, by_value_tids, origin=typed)
        if spec.get("set") == "model":
            model_name = value
            st.origins["model"] = typed
    apply_env(st, table, env)
    finish(st, catalog, removed)
    target = model_override or model_name or model_from
    if target is None:
        raise OptkgError(f"{label}: no model in the command (give it as `vllm serve <model>` / --model-path, or pass --config)")
    st.model = load_config_file(target) if model_override else resolver(target)
    st.name = f"{Path(target).name if model_override else target} ({engine})"
    return st


def apply_flag(st: Stack, catalog: Catalog, engine: str, spec: dict[str, Any], value: Any, flag: str,
               removed: set[str], by_value_tids: set[str] = frozenset(), origin: str | None = None) -> None:
    """Apply one flag entry's effect (setting, technique, removals); later calls win over earlier ones.

    ``origin`` (the flag as typed, or file:line) is recorded in ``st.origins`` for what it sets."""
    typ = spec["type"]
    if origin:
        for key in (spec.get("set"), spec.get("technique"), spec.get("removes"),
                    *((spec.get("technique_by_value") or {}).values()), *((spec.get("fields") or {}).values())):
            if key and key != "model":
                st.origins[key] = origin
    if spec.get("set") == "kv_cache_dtype":
        check_kv_cache_dtype(value, engine, flag)
    if spec.get("set") and spec["set"] != "model":
        st.settings[spec["set"]] = value
    if typ == "json":
        for src, dst in (spec.get("fields") or {}).items():
            if src in value:
                kind = BASE_SETTINGS.get(dst, ("string", ""))[0]
                st.settings[dst] = _coerce(value[src], kind, f"{flag}.{src}", 1 if kind == "integer" else None)
    if typ == "flag" and value is False:
        # --enable-x=false: the flag's technique is off (even an engine default), and it removes nothing
        if spec.get("technique"):
            removed.add(spec["technique"])
        return
    tid = spec.get("technique")
    if spec.get("technique_by_value") and isinstance(value, str):
        tid = spec["technique_by_value"].get(value.lower())
        # a later -q replaces an earlier one: only the last value's technique stays
        removed.update(t for t in by_value_tids if t != tid and t in spec["technique_by_value"].values())
    if tid and (not spec.get("when") or evaluate(spec["when"], {"value": value})):
        removed.discard(tid)
        if catalog.resolve(tid):
            add_technique(st, catalog, tid, None, flag)
    elif tid and spec.get("when") and tid in st.techniques and not spec.get("removes_when"):
        # the flag was given again with a value that does not imply the technique (-tp 4 ... -tp 1)
        removed.add(tid)
    if spec.get("removes_when") and evaluate(spec["removes_when"], {"value": value}) and spec.get("technique"):
        removed.add(spec["technique"])
    if spec.get("removes"):
        removed.add(spec["removes"])


def apply_env(st: Stack, table: dict[str, Any], env: dict[str, str]) -> None:
    """Read the environment assignments the table's ``env`` models; list the others as ignored."""
    for k, v in env.items():
        spec = (table.get("env") or {}).get(k)
        if not spec:
            st.ignored.append(f"{k}={v}")
        elif spec.get("type") == "device_list":
            devices = [x for x in v.split(",") if x.strip()]
            if devices:
                st.gpu_count = len(devices)
            else:
                st.notes.append(f"environment {k} is empty: the engine sees no GPU")
        elif spec.get("type") == "boolean":
            st.settings[spec["set"]] = v.strip().lower() in ("1", "true", "yes")
        else:
            st.settings[spec["set"]] = _coerce(v, spec["type"], f"environment {k}")


def finish(st: Stack, catalog: Catalog, removed: set[str]) -> None:
    """Drop removed techniques; technique parameters mirror the settings they came from."""
    for tid in removed:
        st.techniques.pop(tid, None)
    for tid in list(st.techniques):
        for pname in _param_specs(catalog, tid):
            if pname in st.settings:
                st.techniques[tid][pname] = st.settings[pname]


def parse_with_table(command: str, catalog: Catalog, engine: str, model_override: str | None = None,
                     flag_label: str | None = None, resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """Parse a whole launch command of ``engine`` (program optional) into a Stack (see ``parse_words``).

    ``VAR=value`` assignments (also after ``env``) and launcher words before the program are
    separated first. Raises OptkgError when the words start with another program of the same
    family (``vllm chat``), or naming the flag and what was expected.
    """
    label = flag_label or f"--{engine}"
    table = table_for(engine, label)
    words = tokens(command)
    if not words:
        raise OptkgError(f"{label}: empty command")
    env_words, launch, words, found = split_launch(words, table)
    env: dict[str, str] = dict(w.split("=", 1) for w in env_words)
    if not found and words and not words[0].startswith("-") and program_word(words[0]) in ("vllm", "python", "sglang"):
        raise OptkgError(f"{label}: does not look like a {engine} launch command "
                         f"(expected it to start with {' '.join(table['programs'][0])})")
    return parse_words(words, catalog, engine, label=label, env=env, launch=launch,
                       model_override=model_override, resolver=resolver)
