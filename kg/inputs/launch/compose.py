"""Compose files (``docker compose`` / ``podman compose``): one stack per service that runs a serving engine.

Per service: ``image``, ``entrypoint`` (replaces the image's), ``command`` (string, split with
shlex, or list), ``environment`` (list of ``VAR=value`` or mapping), GPUs from
``deploy.resources.reservations.devices`` entries with ``capabilities: [gpu]`` (``count: N`` /
``count: all``, or ``device_ids``), else ``NVIDIA_VISIBLE_DEVICES`` (compose spec, "deploy" and
"devices" sections). Malformed services raise OptkgError '<file>:<line>: ...'.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import YamlDoc
from kg.inputs.launch.container import ContainerSpec, add_container_stack


def is_compose(doc: YamlDoc) -> bool:
    """A compose file: a mapping whose ``services`` maps names to mappings with an image, build or command."""
    d = doc.data
    if not isinstance(d, dict) or not isinstance(d.get("services"), dict) or not d["services"]:
        return False
    return all(isinstance(s, dict) and ({"image", "build", "command", "entrypoint"} & set(s))
               for s in d["services"].values())


def _words(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as e:
            raise OptkgError(f"{where}: cannot split into words ({e})") from None
    if isinstance(value, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
        return [str(x) for x in value]
    raise OptkgError(f"{where}: expected a string or a list of strings")


def _gpus(svc: dict[str, Any], env: dict[str, str], where: str) -> int | None:
    devices = ((svc.get("deploy") or {}).get("resources") or {}).get("reservations", {}) if isinstance(svc.get("deploy"), dict) else {}
    devices = (devices or {}).get("devices") if isinstance(devices, dict) else None
    for dev in devices or []:
        if not isinstance(dev, dict):
            raise OptkgError(f"{where}: deploy.resources.reservations.devices: expected mappings")
        if "gpu" not in (dev.get("capabilities") or []) and dev.get("driver") != "nvidia":
            continue
        if dev.get("device_ids"):
            return len(dev["device_ids"])
        count = dev.get("count")
        if count == "all" or count is None:
            return None
        if isinstance(count, bool) or not (str(count).isascii() and str(count).isdigit()):
            raise OptkgError(f"{where}: deploy.resources.reservations.devices count: expected a number or 'all', found {count!r}")
        return int(count)
    vis = env.get("NVIDIA_VISIBLE_DEVICES")
    if vis and vis not in ("all", "none", "void"):
        return len([x for x in vis.split(",") if x.strip()])
    return None


def stacks_from_compose(doc: YamlDoc, catalog: Any, file_lines: list[str], *, base_dir: Path | None = None,
                        model_override: str | None = None,
                        resolver: Callable[[str], Any] | None = None) -> tuple[list[Any], list[str]]:
    """(one Stack per service that runs a known serving engine, notes on the other services)."""
    stacks, skipped = [], []
    for name, svc in doc.data["services"].items():
        p = ("services", name)
        where = f"{doc.path}:{doc.where(p)[0]}"
        env: dict[str, str] = {}
        raw = svc.get("environment") or {}
        if isinstance(raw, list):
            for item in raw:
                k, has, v = str(item).partition("=")
                if has:
                    env[k] = v
        elif isinstance(raw, dict):
            env = {str(k): "" if v is None else str(v) for k, v in raw.items()}
        else:
            raise OptkgError(f"{doc.path}:{doc.where(p + ('environment',))[0]}: environment: expected a list or a mapping")
        image = svc.get("image")
        if image is not None and not isinstance(image, str):
            raise OptkgError(f"{doc.path}:{doc.where(p + ('image',))[0]}: image: expected a string")
        spec = ContainerSpec(name=f"service/{name}", image=image,
                             entrypoint=_words(svc.get("entrypoint"), f"{doc.path}:{doc.where(p + ('entrypoint',))[0]}: entrypoint"),
                             args=_words(svc.get("command"), f"{doc.path}:{doc.where(p + ('command',))[0]}: command") or [],
                             env=env, where=where, path=doc.path, start_line=doc.where(p)[0],
                             gpu_count=_gpus(svc, env, where),
                             roles=[r for r in ("prefill", "decode") if r in str(name).lower()])
        add_container_stack(spec, f"service {name}", stacks, skipped, catalog, file_lines, base_dir=base_dir,
                            model_override=model_override, resolver=resolver)
    return stacks, skipped
