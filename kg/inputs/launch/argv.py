"""Shared argv handling for launch commands: split a pasted command into words, find the program,
and read the engine's flags with its flag table (``catalog/engines/<engine>.yaml``).

Every engine parser (``kg.inputs.launch.vllm``, ``...sglang``) uses ``parse_with_table``; an engine
module only says which table and which label. Words are split with :func:`shlex.split` (POSIX
rules, backslash-newline continuations joined first).
"""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
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


def parse_with_table(command: str, catalog: Catalog, engine: str, model_override: str | None = None,
                     flag_label: str | None = None, resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """Parse a launch command of ``engine`` into a Stack with the engine's flag table.

    ``VAR=value`` environment assignments (also after ``env``) are read where the engine table's
    ``env`` models them (``CUDA_VISIBLE_DEVICES`` sets the GPU count) and listed as ignored
    otherwise; launcher words before the program (``uv run``, ``nohup``, ...) are skipped, with a
    note unless the table's ``launchers`` knows them. Flags the table does not model go to
    ``Stack.ignored``; value-less ones (the table's ``boolean_flags``, any ``--no-*``) never take
    the next word, so ``vllm serve --trust-remote-code <model>`` keeps its model. ``--flag=false``
    turns a flag off (removing the technique it stands for). ``--kv-cache-dtype`` must be one of
    the table's ``kv_cache_dtypes``. Raises OptkgError naming the flag and what was expected.
    """
    label = flag_label or f"--{engine}"
    tables = _engine_tables()
    if engine not in tables or not tables[engine].get("programs"):
        raise OptkgError(f"{label}: no flag table for engine '{engine}'")
    table = tables[engine]
    words = tokens(command)
    if not words:
        raise OptkgError(f"{label}: empty command")
    env_words, launch, words, found = split_launch(words, table)
    env: dict[str, str] = dict(w.split("=", 1) for w in env_words)
    if not found and words and not words[0].startswith("-") and program_word(words[0]) in ("vllm", "python", "sglang"):
        raise OptkgError(f"{label}: does not look like a {engine} launch command "
                         f"(expected it to start with {' '.join(table['programs'][0])})")
    by_name: dict[str, dict[str, Any]] = {}
    for spec in table["flags"]:
        for n in spec["names"]:
            by_name[n] = spec
    valueless = {str(f) for f in table.get("boolean_flags") or []}
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
    removed: set[str] = set()
    model_name = None
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            if table.get("positional_model") and model_name is None:
                model_name = w
            else:
                st.ignored.append(w)
            i += 1
            continue
        name, eq, inline = w.partition("=")
        spec = by_name.get(name)
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
        flag = f"{label} {name}"
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
            if typ == "json":
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
        if spec.get("set") == "kv_cache_dtype":
            check_kv_cache_dtype(value, engine, flag)
        if spec.get("set"):
            if spec["set"] == "model":
                model_name = value
            else:
                st.settings[spec["set"]] = value
        if typ == "json":
            for src, dst in (spec.get("fields") or {}).items():
                if src in value:
                    kind = BASE_SETTINGS.get(dst, ("string", ""))[0]
                    st.settings[dst] = _coerce(value[src], kind, f"{flag}.{src}",
                                               1 if kind == "integer" else None)
        if typ == "flag" and value is False:
            # --enable-x=false: the flag's technique is off (even an engine default), and it removes nothing
            if spec.get("technique"):
                removed.add(spec["technique"])
            continue
        tid = spec.get("technique")
        if spec.get("technique_by_value") and isinstance(value, str):
            tid = spec["technique_by_value"].get(value.lower())
        if tid and (not spec.get("when") or evaluate(spec["when"], {"value": value})):
            removed.discard(tid)
            if catalog.resolve(tid):
                add_technique(st, catalog, tid, None, flag)
        if spec.get("removes_when") and evaluate(spec["removes_when"], {"value": value}) and spec.get("technique"):
            removed.add(spec["technique"])
        if spec.get("removes"):
            removed.add(spec["removes"])
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
    for tid in removed:
        st.techniques.pop(tid, None)
    # technique parameters mirror the settings they came from (tp_size lives on tensor-parallelism)
    for tid in list(st.techniques):
        for pname in _param_specs(catalog, tid):
            if pname in st.settings:
                st.techniques[tid][pname] = st.settings[pname]
    target = model_override or model_name
    if target is None:
        raise OptkgError(f"{label}: no model in the command (give it as `vllm serve <model>` / --model-path, or pass --config)")
    st.model = load_config_file(target) if model_override else resolver(target)
    st.name = f"{Path(target).name if model_override else target} ({engine})"
    return st
