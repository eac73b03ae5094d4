"""LoRA adapters named in a launch command: each adapter's ``adapter_config.json``, read before the engine starts.

vLLM takes ``--lora-modules name=path`` or ``--lora-modules '{"name": ..., "path": ...}'`` (vllm 0.33.0
``entrypoints/common/cli_args.py:38-69``, ``LoRAParserAction``: ``name=path`` when the item has ``=`` and no
comma, else JSON); SGLang takes ``--lora-paths PATH | NAME=PATH | {"lora_name": ..., "lora_path": ...}``
(sglang 0.5.23 ``srt/arg_groups/fields/lora.py:54-61``). A path is a local folder holding
``adapter_config.json`` (read relative to the launch's directory) or a hub id found in the local Hugging Face
cache (``huggingface_hub.try_to_load_from_cache``: never the network).

What the engines check from that file, and the settings this module sets for the rules:

- ``lora_adapter_rank``: the largest ``max(r, *rank_pattern.values())`` over the adapters (vllm 0.33.0
  ``lora/peft_helper.py:192-198`` compares it with ``max_lora_rank``);
- ``lora_adapter_modules_to_save``: the union of ``modules_to_save``, and ``lora_adapter_modules_to_save_heads_only``
  (every one is a classification head, ``classifier`` / ``score``: the only ones vLLM 0.33.0 accepts,
  ``peft_helper.py:56-65``);
- ``lora_adapter_use_dora`` (``peft_helper.py:66-67``), ``lora_adapter_bias`` (``bias`` other than ``none``:
  ``peft_helper.py:200-201``);
- ``lora_adapter_target_modules``: the union of ``target_modules``; ``lora_adapters_read`` /
  ``lora_adapters_named``: how many adapters were read out of how many the command names.

An adapter whose file cannot be found is a note naming the path (the facts then cover the adapters read).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import HUB_ID, hf_cache_dir

ADAPTER_FILE = "adapter_config.json"
MAX_ADAPTER_FILE_BYTES = 1 << 20  # an adapter_config.json is a few kB; refuse anything larger
CLASSIFIER_HEADS = ("classifier", "score")  # the modules_to_save vLLM accepts (0.33.0 peft_helper.py:56-58)


def split_specs(raw: str) -> list[str]:
    """The items of an ``nargs='+'`` value the launch parser joined with spaces; a JSON item may hold spaces."""
    out: list[str] = []
    buf = ""
    for word in str(raw).split(" "):
        if not word and not buf:
            continue
        buf = f"{buf} {word}" if buf else word
        if buf.lstrip().startswith("{"):
            try:
                json.loads(buf)
            except ValueError:
                continue  # an unfinished JSON object: keep reading words
        out.append(buf)
        buf = ""
    if buf:
        out.append(buf)
    return out


def adapter_syntax(engine: str | None) -> dict[str, Any] | None:
    """How ``engine``'s launch names LoRA adapters: its flag table's ``lora_adapters`` entry (catalog/engines/), with
    ``setting`` (the setting the flag fills), ``json_keys`` (name and path keys of a JSON item), ``name_path``
    (``no_comma``: ``name=path`` only without a comma, vLLM's LoRAParserAction; ``always``) and ``bare_path``
    (``name``: a bare path is its own name, SGLang; ``error``). None for an engine without one."""
    from kg.inputs.stack import _engine_tables
    return (_engine_tables().get(engine or "") or {}).get("lora_adapters")


def parse_spec(item: str, syntax: dict[str, Any], flag: str) -> tuple[str, str]:
    """(name, path) of one adapter item, as the engine's own parser reads it (module doc; ``adapter_syntax``)."""
    item = item.strip()
    if item.startswith("{"):
        try:
            d = json.loads(item)
        except ValueError:
            raise OptkgError(f"{flag}: invalid JSON for an adapter: {item!r}") from None
        keys = tuple(syntax["json_keys"])
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in keys):
            raise OptkgError(f"{flag}: an adapter in JSON needs the keys {keys[0]!r} and {keys[1]!r}: {item!r}")
        return d[keys[0]], d[keys[1]]
    if "=" in item and (syntax.get("name_path") != "no_comma" or "," not in item):
        name, path = item.split("=", 1)
        return name, path
    if syntax.get("bare_path") != "name":
        raise OptkgError(f"{flag}: expected name=path or a JSON object, found {item!r}")
    return item, item  # a bare path is its own name


def find_adapter_config(path: str, base_dir: Path | None) -> Path | None:
    """``adapter_config.json`` of an adapter: a local folder (relative to ``base_dir``), else a hub id in the
    local Hugging Face cache. None when neither holds it."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if p.is_dir():
        f = p / ADAPTER_FILE
        return f if f.is_file() else None
    if not HUB_ID.match(path):
        return None
    cache = hf_cache_dir()
    if not (cache / f"models--{path.replace('/', '--')}").is_dir():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        got = try_to_load_from_cache(path, ADAPTER_FILE, cache_dir=str(cache))
    except (ValueError, OSError):
        return None
    return Path(got) if isinstance(got, str) else None


def read_adapter_config(f: Path) -> dict[str, Any]:
    """The adapter's config as a mapping; a one-line error naming the file when it is not one."""
    if f.stat().st_size > MAX_ADAPTER_FILE_BYTES:
        raise OptkgError(f"{f}: {f.stat().st_size:,} bytes is too large for an adapter_config.json")
    try:
        d = json.loads(f.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise OptkgError(f"{f}: not valid JSON ({type(e).__name__})") from None
    if not isinstance(d, dict):
        raise OptkgError(f"{f}: an adapter_config.json must be a JSON object")
    r = d.get("r")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise OptkgError(f"{f}: field 'r' must be a positive integer (the LoRA rank), found {r!r}")
    pattern = d.get("rank_pattern") or {}
    if not isinstance(pattern, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in pattern.values()):
        raise OptkgError(f"{f}: field 'rank_pattern' must map module names to integer ranks")
    return d


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def adapter_settings(raw: str, engine: str, flag: str, base_dir: Path | None) -> tuple[dict[str, Any], list[str]]:
    """(settings, notes) for the adapters of one ``--lora-modules`` / ``--lora-paths`` value (module doc)."""
    syntax = adapter_syntax(engine)
    if syntax is None:
        raise OptkgError(f"{flag}: optkg does not know how {engine} names LoRA adapters")
    items = [parse_spec(i, syntax, flag) for i in split_specs(raw)]
    ranks: list[int] = []
    saved: list[str] = []
    targets: list[str] = []
    dora = bias = False
    notes: list[str] = []
    read = 0
    for name, path in items:
        f = find_adapter_config(path, base_dir)
        if f is None:
            notes.append(f"{flag}: adapter '{name}': no {ADAPTER_FILE} at {path} (a local folder or a hub id in the "
                         f"Hugging Face cache {hf_cache_dir()}); its rank and modules are not checked")
            continue
        d = read_adapter_config(f)
        read += 1
        ranks.append(max([d["r"], *(d.get("rank_pattern") or {}).values()]))
        saved += [m for m in _names(d.get("modules_to_save")) if m not in saved]
        targets += [m for m in _names(d.get("target_modules")) if m not in targets]
        dora = dora or bool(d.get("use_dora"))
        bias = bias or str(d.get("bias") or "none") != "none"
    out: dict[str, Any] = {"lora_adapters_named": len(items), "lora_adapters_read": read}
    if read:
        out.update({"lora_adapter_rank": max(ranks), "lora_adapter_modules_to_save": saved,
                    "lora_adapter_modules_to_save_heads_only": all(m in CLASSIFIER_HEADS for m in saved),
                    "lora_adapter_target_modules": targets, "lora_adapter_use_dora": dora, "lora_adapter_bias": bias})
    return out, notes


def apply_adapters(stack, engine: str | None, base_dir: Path | None) -> None:
    """Set the adapter facts on ``stack.settings`` from its ``lora_modules`` / ``lora_paths`` value (module doc);
    a ``lora_adapter_rank`` the stack already gives wins (it is the user's own statement)."""
    syntax = adapter_syntax(engine)
    key = syntax["setting"] if syntax else None
    raw = stack.settings.get(key) if key else None
    if not raw:
        return
    flag = stack.origins.get(key) or f"--{key.replace('_', '-')}"
    got, notes = adapter_settings(str(raw), str(engine), flag, base_dir)
    for k, v in got.items():
        stack.settings.setdefault(k, v)
    stack.notes.extend(n for n in notes if n not in stack.notes)
