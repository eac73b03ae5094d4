"""Container launches: ``docker run [OPTIONS] IMAGE [ARGS]`` (also ``podman run``, ``nerdctl run``).

The image (``catalog/launch/containers.yaml``) or the words after it name the engine: a known
image with an entrypoint (``vllm/vllm-openai`` runs ``vllm serve``) takes the words as that
program's arguments; otherwise the words must start with a registered program
(``python3 -m sglang.launch_server ...``). ``--entrypoint X`` replaces the image's entrypoint.
``-e/--env VAR=value`` reach the engine's environment; ``--gpus`` gives the GPU count (``8``,
``count=8``, ``device=0,1``; ``all`` is unknown and noted); an image tag that is a version gives
the engine release. Docker's value-less options (``docker run --help``: -d, -i, -t, --rm, --init,
--privileged, --read-only, -P, --no-healthcheck, --oom-kill-disable, --sig-proxy, -q) and bundles
such as ``-it`` take no value; every other option takes one.
"""
from __future__ import annotations

import csv
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.inputs.launch.registry import Launch, Launcher, match_program, register
from kg.core.lazyre import lazy_re

VALUELESS = {"-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--init", "--privileged",
             "--read-only", "-P", "--publish-all", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
             "-q", "--quiet", "--disable-content-trust", "--help"}
_SHORT_BOOL = set("dit" "P" "q")
# a release in a tag: 0.9.2, v0.8.5.post1, v0.11.0-cu128, and four-part releases such as vLLM's v0.10.1.1
_VERSION = lazy_re(r"v?(\d+\.\d+(?:\.\d+){0,2}(?:\.post\d+|rc\d+)?)(?:[-_].*)?")


def images() -> list[dict[str, Any]]:
    """The image table (``catalog/launch/containers.yaml``)."""
    data = load_yaml(paths.catalog_dir() / "launch" / "containers.yaml").data
    return list(data.get("images") or [])


def split_image(ref: str) -> tuple[str, str | None]:
    """(repository, tag) of an image reference; a ``@sha256:`` digest is dropped, ``docker.io/`` is implied."""
    ref = ref.split("@", 1)[0]
    name, tag = ref, None
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        name, tag = ref[:colon], ref[colon + 1:]
    for p in ("docker.io/library/", "docker.io/", "index.docker.io/"):
        if name.startswith(p):
            name = name[len(p):]
    return name, tag


def image_info(ref: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the image's table entry or None, the engine release its tag names or None)."""
    name, tag = split_image(ref)
    entry = next((e for e in images() if e["repository"] == name), None)
    version = None
    if tag:
        m = _VERSION.fullmatch(tag)
        if m:
            version = m.group(1)
    return entry, version


def gpu_count(value: str) -> int | None:
    """GPUs a ``--gpus`` value gives the container: ``8`` / ``count=8`` -> 8, ``device=0,1`` -> 2, ``all`` -> None."""
    v = value.strip().strip("'\"")
    if v.isascii() and v.isdigit():
        return int(v)
    if v == "all":
        return None
    fields = next(csv.reader([v]))
    for f in fields:
        k, _, val = f.strip().strip("'\"").partition("=")
        if k == "count":
            return None if val == "all" else int(val) if val.isascii() and val.isdigit() else None
        if k == "device":
            rest = [x for x in fields if "=" not in x]
            return len([d for d in [val, *rest] if d.strip()])
    return None


def parse_launch(launch: Launch) -> Any:
    """Parse the engine command inside a ``docker run``; returns what that engine's launcher returns."""
    args = list(launch.args)
    env = dict(launch.env)
    entrypoint: list[str] | None = None
    gpus: int | None = None
    gpus_all = False
    i = 0
    while i < len(args):
        w = args[i]
        if not w.startswith("-") or w == "-":
            break
        name, eq, inline = w.partition("=")
        if name in VALUELESS or (len(w) > 2 and w[0] == "-" and w[1] != "-" and set(w[1:]) <= _SHORT_BOOL):
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        else:
            if i + 1 >= len(args):
                raise OptkgError(f"{launch.label}: docker option {name} expects a value")
            value, i = args[i + 1], i + 2
        if name in ("-e", "--env"):
            k, has, v = value.partition("=")
            if has:
                env[k] = v
            else:
                launch.notes.append(f"{launch.label}: -e {k} takes its value from the host environment (not known here)")
        elif name == "--gpus":
            gpus = gpu_count(value)
            gpus_all = gpus is None
        elif name == "--entrypoint":
            entrypoint = value.split()
    if i >= len(args):
        raise OptkgError(f"{launch.label}: no image in the docker command")
    image, rest = args[i], args[i + 1:]
    entry, version = image_info(image)
    if gpus is None and "NVIDIA_VISIBLE_DEVICES" in env and env["NVIDIA_VISIBLE_DEVICES"] not in ("all", "void", "none"):
        gpus = len([d for d in env["NVIDIA_VISIBLE_DEVICES"].split(",") if d.strip()])
    ep = entrypoint if entrypoint is not None else list((entry or {}).get("entrypoint") or [])
    repeated = bool(ep) and entrypoint is None and rest[:len(ep)] == ep
    words = rest if repeated else ep + rest
    m = match_program(words)
    if m is None or m[1] != 0:
        if entry is None:
            raise OptkgError(f"{launch.label}: image '{image}' is not a known serving image "
                             f"(catalog/launch/containers.yaml) and the words after it name no known launch program")
        raise OptkgError(f"{launch.label}: image '{image}' ({entry['engine']}) has no entrypoint optkg can read; "
                         "put the engine command after the image")
    lz, a, b = m
    if lz.name == "docker":
        raise OptkgError(f"{launch.label}: a docker run inside a container is not supported")
    sub = Launch(command=launch.command, env=env, prefix=[], program=words[a:b], args=words[b:],
                 catalog=launch.catalog, base_dir=launch.base_dir, label=launch.label,
                 model_override=launch.model_override, resolver=launch.resolver,
                 engine_version=version or launch.engine_version, gpu_count=gpus, notes=list(launch.notes))
    if repeated:
        sub.notes.append(f"{launch.label}: image {image} already runs `{' '.join(ep)}`; "
                         "repeating it after the image passes it again as arguments (the engine refuses "
                         "'unrecognized arguments')")
    if gpus_all:
        sub.notes.append(f"{launch.label}: --gpus all gives the container every GPU of the host; pass --count N")
    if entry and entry["engine"] != lz.name:
        sub.notes.append(f"{launch.label}: image {image} is a {entry['engine']} image but the command runs {lz.name}")
    if version is None and entry:
        _, tag = split_image(image)
        what = f"digest '{image.split('@', 1)[1]}'" if "@" in image and tag is None else f"tag '{tag or 'latest'}'"
        sub.notes.append(f"{launch.label}: image {what} names no release; the engine version is unknown")
    return lz.parse(sub)


register(Launcher(name="docker", kind="container",
                  programs=(("docker", "run"), ("docker", "container", "run"), ("podman", "run"), ("nerdctl", "run")),
                  parse=parse_launch))
