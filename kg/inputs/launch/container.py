"""A serving container described by a file (Kubernetes manifest, compose file): what it runs.

``ContainerSpec`` holds what a manifest says about one container: image, entrypoint override
(Kubernetes ``command``, compose ``entrypoint``), arguments (Kubernetes ``args``, compose
``command``), environment, GPUs and GPU type, and where it sits (file:line). ``container_words``
turns it into the words the container runs: the entrypoint (the override or the image's own,
``catalog/launch/containers.yaml``) followed by the arguments; a shell wrapper
(``sh -c "...; vllm serve ..."``) is split into its commands and the one that starts a registered
launch program is kept. ``stack_from_container`` parses those words with the engine's launcher
and records, for each setting and technique, the file:line of the word that set it.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.inputs.launch.docker import image_info
from kg.inputs.launch.registry import Launch, match_program
from kg.core.lazyre import lazy_re

SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env bash", "zsh", "dash"}
_K8S_VAR = lazy_re(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass
class ContainerSpec:
    """One container of a manifest (see module doc). ``line_of`` maps a word index of ``args``/``entrypoint``
    items to its file line; ``where`` is the container's file:line."""

    name: str
    image: str | None
    entrypoint: list[str] | None
    args: list[str]
    env: dict[str, str]
    where: str
    path: str
    start_line: int = 1
    gpu_count: int | None = None
    gpu_type: str | None = None
    roles: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def gpu_type_candidates(value: str) -> list[str]:
    """Names to try in the hardware catalog for a node-label value (``NVIDIA-H100-80GB-HBM3`` -> H100-80GB-HBM3, H100)."""
    v = str(value).strip()
    low = v.lower()
    for p in ("nvidia-", "tesla-", "amd-", "instinct-"):
        if low.startswith(p):
            v = v[len(p):]
            low = v.lower()
    out = [str(value), v]
    if "-" in v:
        out.append(v.split("-")[0])
    return out


def _shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script (split on ; && || | & and newlines), each as words."""
    lex = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    out: list[list[str]] = [[]]
    try:
        for tok in lex:
            if tok and set(tok) <= set(";&|"):
                out.append([])
            else:
                out[-1].append(tok)
    except ValueError as e:
        raise OptkgError(f"cannot split the shell command into words ({e})") from None
    return [c for c in out if c]


def container_words(spec: ContainerSpec) -> tuple[list[str] | None, str | None]:
    """(the words of the engine command the container runs, or None; the engine its image belongs to)."""
    entry, _version = image_info(spec.image) if spec.image else (None, None)
    ep = spec.entrypoint if spec.entrypoint is not None else list((entry or {}).get("entrypoint") or [])
    words = [_K8S_VAR.sub(lambda m: spec.env.get(m.group(1), m.group(0)), w) for w in ep + spec.args]
    if len(words) >= 3 and words[0] in SHELLS and words[1] in ("-c", "-lc", "-ec", "-xc"):
        script = words[2]
        for cmd in _shell_commands(script):
            m = match_program(cmd)
            if m is not None:
                return cmd, (entry or {}).get("engine")
        return None, (entry or {}).get("engine")
    if words and match_program(words) is not None:
        return words, (entry or {}).get("engine")
    return None, (entry or {}).get("engine")


def _find_line(lines: list[str], word: str, start: int) -> int | None:
    """The first line at or after ``start`` (1-based) whose text contains ``word``."""
    for i in range(max(start, 1) - 1, len(lines)):
        if word in lines[i]:
            return i + 1
    return None


def add_container_stack(spec: ContainerSpec, what: str, stacks: list[Any], skipped: list[str], catalog: Any,
                        file_lines: list[str], **options: Any) -> None:
    """Append the Stack of ``spec`` to ``stacks`` (its name tagged with the container's prefill/decode
    roles), or a note to ``skipped`` naming ``what`` (e.g. "service vllm") when it runs no known engine.
    ``options``: base_dir, model_override, resolver as for ``stack_from_container``."""
    st = stack_from_container(spec, catalog, file_lines, **options)
    if st is None:
        skipped.append(f"{spec.where}: {what} runs no known serving engine (skipped)")
        return
    if spec.roles:
        st.name += f" [{'/'.join(spec.roles)}]"
    stacks.append(st)


def stack_from_container(spec: ContainerSpec, catalog: Any, file_lines: list[str], *,
                         base_dir: Path | None = None, model_override: str | None = None,
                         resolver: Callable[[str], Any] | None = None) -> Any | None:
    """The Stack of the engine command ``spec`` runs; None when it runs no known launch program.

    ``Stack.origins`` (setting/technique -> flag as typed) becomes file:line; notes name the container.
    Raises OptkgError '<file:line>: ...' for a bad flag value.
    """
    words, image_engine = container_words(spec)
    if words is None:
        return None
    m = match_program(words)
    lz, a, b = m
    prefix = words[:a]
    env = dict(spec.env)
    env.update(w.split("=", 1) for w in prefix if "=" in w and not w.startswith("-"))
    _, version = image_info(spec.image) if spec.image else (None, None)
    launch = Launch(command=" ".join(words), env=env, prefix=[w for w in prefix if "=" not in w],
                    program=words[a:b], args=words[b:], catalog=catalog, base_dir=base_dir,
                    label=spec.where, model_override=model_override, resolver=resolver,
                    engine_version=version, gpu_count=spec.gpu_count, notes=list(spec.notes))
    try:
        st = lz.parse(launch)
    except OptkgError as e:
        msg = str(e)
        raise OptkgError(msg if msg.startswith(spec.path) else f"{spec.where}: {msg}") from None
    if spec.gpu_type and st.hardware is None:
        for name in gpu_type_candidates(spec.gpu_type):
            try:
                st.hardware = catalog.resolve_hardware(name)
                break
            except OptkgError:
                continue
        else:
            st.notes.append(f"{spec.where}: GPU type '{spec.gpu_type}' from the node labels is not a known GPU")
    if image_engine and image_engine != st.engine:
        st.notes.append(f"{spec.where}: image {spec.image} is a {image_engine} image but the container runs {st.engine}")
    origins = getattr(st, "origins", None) or {}
    for key, flag in list(origins.items()):
        if ":" in flag and flag.startswith(spec.path):
            continue
        line = _find_line(file_lines, flag.split("=", 1)[0], spec.start_line)
        origins[key] = f"{spec.path}:{line or spec.start_line}"
    origins.setdefault("@stack", spec.where)
    st.source = spec.path
    st.name = f"{spec.name}: {st.name}"
    return st
