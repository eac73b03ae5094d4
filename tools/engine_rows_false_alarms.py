"""Run every generated engine check row over every stack optkg has fixtures for and list each firing.

Usage: python tools/engine_rows_false_alarms.py [--engine vllm] [--release 0.34.0 ...] [--docs FILE ...]

Stacks: the ``input`` of every ``check`` rule fixture (fire and pass cases, all rules), the stack files under
tests/fixtures/field_cases/ and examples/, and the launch commands of --docs files (one command per line, ``#``
comments: the vLLM project's recipes, tests/fixtures/launch/vllm-recipes-commands.txt, written by
tools/vllm_recipe_commands.py). Each stack of the engine
is checked at its own release and at every ``--release`` (default: every release with a sites file). A firing is
a generated row the engine would raise on: on a stack the engine starts (a documented example, a fixture that
says the stack runs) it is a false alarm. Prints one line per firing and a summary; exit 1 when a --docs command
or a stack marked ``# starts`` gets a refusal.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fixture_inputs() -> list[tuple[str, Any, Path]]:
    """(label, input, base dir) of every check-kind rule fixture case and stack file."""
    from kg.core.yamlio import load_yaml
    from kg.engine.fixtures import load_fixture_cases
    out = []
    for c in load_fixture_cases():
        out.append((f"{Path(c.file).name}:{'fire' if c.expect_fire else 'pass'}:{c.name}", c.input, Path(c.file).parent))
    for folder in (ROOT / "tests" / "fixtures" / "field_cases", ROOT / "examples"):
        for f in sorted(folder.glob("*.yaml")):
            d = load_yaml(f).data
            if isinstance(d, dict) and "model" in d and "engine" in d:
                out.append((str(f.relative_to(ROOT)), d, f.parent))
    return out


def doc_commands(files: list[Path]) -> list[tuple[str, str]]:
    out = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            t = line.strip()
            if t and not t.startswith("#"):
                out.append((f"{f.name}:{i}", t))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--release", action="append")
    ap.add_argument("--docs", action="append", type=Path, default=[])
    ap.add_argument("--rows-evaluated", action="store_true",
                    help="also count, per release, the table rows evaluated on at least one --docs command")
    a = ap.parse_args(argv)
    row_hits = _count_row_evaluations() if a.rows_evaluated else None
    from kg.analyses.check import fixture_stack, stack_facts
    from kg.analyses.enginechecks import all_sites, generated_refusals
    from kg.core.errors import OptkgError
    from kg.knowledge.catalog import load_catalog
    catalog = load_catalog()[0]
    releases = a.release or [d["release"] for d in all_sites() if d["engine"] == a.engine]
    stacks: list[tuple[str, Any, bool]] = []
    for label, data, base in fixture_inputs():
        if not isinstance(data, dict):
            continue
        eng = data.get("engine")
        name = eng.get("name") if isinstance(eng, dict) else (eng if isinstance(eng, str) else None)
        if name != a.engine:
            continue
        try:
            st = fixture_stack(data, catalog, base)
        except (OptkgError, Exception) as e:  # noqa: BLE001 - a fixture that does not build is reported, not fatal
            print(f"skip {label}: {str(e)[:100]}")
            continue
        stacks.append((label, st, False))
    from kg.engines.launch import parse_command
    for label, cmd in doc_commands(a.docs):
        try:
            st = parse_command(cmd, catalog, a.engine)
        except OptkgError as e:
            print(f"skip {label}: {str(e)[:120]}")
            continue
        stacks.append((label, st, True))
    bad = 0
    fired = 0
    evaluated = 0
    for label, st, must_start in stacks:
        own = st.engine_version
        for rel in sorted({*(releases), *([own] if own else [])}):
            st.engine_version = rel
            try:
                _, ns = stack_facts(st)
            except OptkgError as e:
                print(f"skip {label} @ {rel}: {str(e)[:100]}")
                continue
            if row_hits is not None:
                row_hits["on"] = (rel, must_start)
            got = generated_refusals(a.engine, rel, ns, stack=st)
            evaluated += got.get("engine_check_rows_evaluated", 0)
            for r in got.get("engine_check_refusals") or []:
                fired += 1
                bad += must_start
                print(f"{'FALSE ALARM ' if must_start else ''}{label} @ {rel}: {r['path']}:{r['line']} "
                      f"{r['message'][:90]}")
        st.engine_version = own
    print(f"{len(stacks)} stacks x {len(releases)} release(s): {evaluated} row evaluations, {fired} refusals, "
          f"{bad} on stacks that start")
    if row_hits is not None:
        for d in all_sites():
            if d["engine"] != a.engine or d["release"] not in releases:
                continue
            rows = {s["expr"] for s in d["sites"] if s["class"] == "table" and s.get("expr")}
            got = rows & row_hits.get(d["release"], set())
            print(f"{a.engine} {d['release']}: {len(got)} of {len(rows)} table rows evaluated on at least one "
                  f"--docs command")
    return 1 if bad else 0


def _count_row_evaluations() -> dict[str, Any]:
    """Record, per release, the row expressions kg.engine.expr.evaluate returned a value for while a --docs
    command (``on``: (release, is a --docs command)) was being checked."""
    import kg.engine.expr as ex
    hits: dict[str, Any] = {"on": None}
    real = ex.evaluate

    def evaluate(text: str, *args: Any, **kw: Any) -> Any:
        out = real(text, *args, **kw)
        on = hits["on"]
        if on is not None and on[1]:
            hits.setdefault(on[0], set()).add(text)
        return out
    ex.evaluate = evaluate
    return hits


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
