"""``optkg check FILE``: what kind of file it is, by its content, and the stacks it describes.

Kinds, tried in this order: a Kubernetes manifest (any document has ``apiVersion`` + ``kind``;
``kg.inputs.launch.kubernetes``), a compose file (``services:``; ``...compose``), a TensorRT-LLM
LLM-API YAML (top-level keys of the LLM API such as ``kv_cache_config``, none of an optkg stack
file's; ``...trtllm``), else an optkg stack file (``kg.inputs.stack``, with its own errors).
A manifest or compose file may describe several serving containers: one Stack each.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml_all, read_text, parse_yaml_all
from kg.inputs.launch import compose, kubernetes, trtllm
from kg.inputs.launch.argv import table_for
from kg.inputs.modelcfg import load_config_file, resolve_model

STACK_KEYS = {"name", "model", "config", "engine", "hardware", "techniques", "settings", "description",
              "framework", "framework_version", "engine_version"}


def _llm_api_keys() -> set[str]:
    return {k.split(".")[0] for k in (table_for("trtllm", "trtllm").get("llm_api") or {})} | {
        "kv_cache_config", "cuda_graph_config", "build_config", "backend", "speculative_config",
        "disable_overlap_scheduler", "print_iter_log", "moe_config", "attn_backend", "cache_transceiver_config"}


def file_kind(path: Path | str) -> str:
    """'kubernetes', 'compose', 'trtllm-llm-api' or 'stack' for the YAML file at ``path`` (OptkgError if unreadable)."""
    docs = load_yaml_all(path)
    return _kind(docs)


def _kind(docs: list) -> str:
    if any(kubernetes.is_manifest(d) for d in docs):
        return "kubernetes"
    if len(docs) == 1 and compose.is_compose(docs[0]):
        return "compose"
    if len(docs) == 1 and isinstance(docs[0].data, dict):
        keys = set(map(str, docs[0].data))
        if keys & _llm_api_keys() and not (keys - {"model"}) & STACK_KEYS:
            return "trtllm-llm-api"
    return "stack"


def stacks_from_file(path: Path | str, catalog: Any, *, model_override: str | None = None,
                     resolver: Callable[[str], Any] = resolve_model,
                     unknown_gpu_ok: bool = False) -> tuple[list[Any], list[str], str]:
    """(the stacks ``path`` describes, notes on skipped containers, the file kind). Raises OptkgError with file:line.

    Files the described commands name (``--config X.yaml``) are read relative to the file's folder.
    """
    text = read_text(path)
    docs = parse_yaml_all(text, str(path))
    kind = _kind(docs)
    base = Path(path).parent
    lines = text.splitlines()
    if kind == "kubernetes":
        stacks, skipped = kubernetes.stacks_from_manifest(docs, catalog, lines, base_dir=base,
                                                          model_override=model_override, resolver=resolver)
    elif kind == "compose":
        stacks, skipped = compose.stacks_from_compose(docs[0], catalog, lines, base_dir=base,
                                                      model_override=model_override, resolver=resolver)
    elif kind == "trtllm-llm-api":
        st = trtllm.stack_from_llm_api(docs[0], catalog, model_override=model_override, resolver=resolver)
        return [st], [], kind
    else:
        from kg.inputs.stack import load_stack_file
        st = load_stack_file(path, catalog, resolver, unknown_gpu_ok=unknown_gpu_ok)
        if model_override:
            st.model = load_config_file(model_override)
        return [st], [], kind
    if not stacks:
        raise OptkgError(f"{path}:1: the {kind} file has no container that runs a known serving engine "
                         f"({'; '.join(skipped) if skipped else 'no containers'}); nothing to check")
    return stacks, skipped, kind
