"""Write the vLLM project's own recipe commands (github.com/vllm-project/recipes, models/*/*.yaml) as one
``vllm serve`` command per line: the configurations vLLM documents as starting, for
tools/engine_rows_false_alarms.py --docs (a generated check row that fires on one is a false alarm).

Usage: python tools/vllm_recipe_commands.py RECIPES_GIT_DIR > tests/fixtures/launch/vllm-recipes-commands.txt

Per recipe and variant: ``vllm serve <model_id> <base_args> <variant extra_args>`` with the environment of
``base_env`` / ``extra_env``; then the same with each single-node strategy the recipe lists as compatible
(strategies/<name>.yaml: its ``vllm_args`` and ``parallel_flag`` 8, one 8-GPU node) and with each feature's
``args`` (a feature with ``modes`` gives each mode; a feature scoped to ``strategies`` is given with the first
single-node one of them, as the recipe's page composes it). Read with ``git show`` at the commit printed in the header.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

import yaml


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def _cmd(env: dict[str, Any], model: str, args: list[str]) -> str:
    pre = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(env.items()))
    return (pre + " " if pre else "") + "vllm serve " + " ".join(shlex.quote(str(a)) for a in [model, *args])


def commands(repo: str) -> tuple[str, list[tuple[str, str]]]:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    files = [f for f in _git(repo, "ls-tree", "-r", "--name-only", "HEAD", "models").split()
             if f.endswith(".yaml")]
    strategies = {}
    for f in _git(repo, "ls-tree", "-r", "--name-only", "HEAD", "strategies").split():
        s = yaml.safe_load(_git(repo, "show", f"HEAD:{f}")) or {}
        if s.get("deploy_type") == "single_node" and s.get("parallel_flag"):
            strategies[s["name"]] = s
    out: list[tuple[str, str]] = []
    for f in files:
        d = yaml.safe_load(_git(repo, "show", f"HEAD:{f}")) or {}
        m = d.get("model") or {}
        if not m.get("model_id"):
            continue
        feats = []  # (label, args, the strategies the feature is scoped to or None)
        for name, ft in (d.get("features") or {}).items():
            if not isinstance(ft, dict):
                continue
            scope = ft.get("strategies")
            if ft.get("args"):
                feats.append((name, [str(a) for a in ft["args"]], scope))
            for mode, mv in (ft.get("modes") or {}).items():
                if isinstance(mv, dict) and mv.get("args"):
                    feats.append((f"{name}.{mode}", [str(a) for a in mv["args"]], mv.get("strategies") or scope))
        for vname, v in (d.get("variants") or {"default": {}}).items():
            v = v or {}
            model = v.get("model_id") or m["model_id"]
            env = {**(m.get("base_env") or {}), **(v.get("extra_env") or {})}
            base = [str(a) for a in (m.get("base_args") or [])] + [str(a) for a in (v.get("extra_args") or [])]
            out.append((f"{f} variant {vname}", _cmd(env, model, base)))
            has_parallel = any(a in ("--tensor-parallel-size", "-tp", "--data-parallel-size", "-dp") for a in base)
            for sname in d.get("compatible_strategies") or []:
                s = strategies.get(sname)
                if s is None or has_parallel:
                    continue
                out.append((f"{f} variant {vname}, strategy {sname} on 8 GPUs",
                            _cmd(env, model, base + [str(a) for a in s.get("vllm_args") or []]
                                 + [s["parallel_flag"], "8"])))
            for fname, fargs, scope in feats:
                if scope:  # a feature scoped to strategies runs with the first single-node one (else not here)
                    s = next((strategies[n] for n in scope if n in strategies), None)
                    if s is None:
                        continue
                    fargs = [str(a) for a in s.get("vllm_args") or []] + [s["parallel_flag"], "8"] + fargs
                    fname += f" with strategy {s['name']} on 8 GPUs"
                out.append((f"{f} variant {vname}, feature {fname}", _cmd(env, model, base + fargs)))
    return commit, out


def main(argv: list[str]) -> int:
    repo = argv[0] if argv else "."
    commit, cmds = commands(repo)
    print(f"# vLLM recipes (github.com/vllm-project/recipes at {commit}), written by tools/vllm_recipe_commands.py:")
    print("# one documented `vllm serve` configuration per line, the recipe file and variant in the comment above it.")
    for label, cmd in cmds:
        print(f"# {label}")
        print(cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
