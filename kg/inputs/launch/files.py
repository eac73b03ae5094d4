"""``optkg check FILE``: what kind of file it is, by its content, and the stacks it describes.

Kinds, tried in this order: a Kubernetes manifest (any document has ``apiVersion`` + ``kind``;
``kg.inputs.launch.kubernetes``), a compose file (``services:``; ``...compose``), a whole-file format an
engine registered (``kg.inputs.launch.registry.file_formats``: the TensorRT-LLM LLM-API YAML of
``kg.engines.trtllm.launch``), else an optkg stack file (``kg.inputs.stack``, with its own errors).
A manifest or compose file may describe several serving containers: one Stack each.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml_all, read_text, parse_yaml_all
from kg.inputs.launch import compose, kubernetes
from kg.inputs.launch.registry import file_formats
from kg.inputs.modelcfg import load_config_file, resolve_model

STACK_KEYS = {"name", "model", "config", "engine", "hardware", "techniques", "settings", "description",
              "framework", "framework_version", "engine_version"}


def file_kind(path: Path | str) -> str:
    """'kubernetes', 'compose', a registered whole-file format's name (``trtllm-llm-api``) or 'stack' for the YAML
    file at ``path`` (OptkgError if unreadable)."""
    docs = load_yaml_all(path)
    return _kind(docs)


def _kind(docs: list) -> str:
    if any(kubernetes.is_manifest(d) for d in docs):
        return "kubernetes"
    if len(docs) == 1 and compose.is_compose(docs[0]):
        return "compose"
    for fmt in file_formats():
        if fmt.detects(docs):
            return fmt.name
    return "stack"


def stacks_from_file(path: Path | str, catalog: Any, *, model_override: str | None = None,
                     resolver: Callable[[str], Any] = resolve_model) -> tuple[list[Any], list[str], str]:
    """(the stacks ``path`` describes, notes on skipped containers, the file kind). Raises OptkgError with file:line.

    Files the described commands name (``--config X.yaml``) are read relative to the file's folder.
    """
    text = read_text(path)
    docs = parse_yaml_all(text, str(path), cache=True)
    kind = _kind(docs)
    base = Path(path).parent
    lines = text.splitlines()
    if kind == "kubernetes":
        stacks, skipped = kubernetes.stacks_from_manifest(docs, catalog, lines, base_dir=base,
                                                          model_override=model_override, resolver=resolver)
    elif kind == "compose":
        stacks, skipped = compose.stacks_from_compose(docs[0], catalog, lines, base_dir=base,
                                                      model_override=model_override, resolver=resolver)
    elif kind != "stack":
        fmt = next(f for f in file_formats() if f.name == kind)
        return [fmt.read(docs[0], catalog, model_override=model_override, resolver=resolver)], [], kind
    else:
        from kg.inputs.stack import load_stack_file
        st = load_stack_file(path, catalog, resolver)
        if model_override:
            st.model = load_config_file(model_override)
        return [st], [], kind
    if not stacks:
        raise OptkgError(f"{path}:1: the {kind} file has no container that runs a known serving engine "
                         f"({'; '.join(skipped) if skipped else 'no containers'}); nothing to check")
    return stacks, skipped, kind
