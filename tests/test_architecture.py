"""The package layout holds: no import cycle (function-level imports count), no lower layer importing
a higher one, nothing importing kg.cli, no module over 800 lines, no engine-name comparison outside the
engine and framework packages, no function over 120 lines in kg/analyses/ (tests/archcheck.py). The
checker is shown to catch each kind of problem on a copy of kg/ with one planted."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from archcheck import (LONG_MODULES, MAX_FUNCTION_LINES, MAX_LINES, engine_branches, import_graph, long_functions,
                       problems)

KG = Path(__file__).resolve().parent.parent / "kg"


def test_the_layout_holds():
    assert problems(KG) == []


def test_the_graph_is_read_from_every_module():
    g = import_graph(KG)
    # a few edges known from the code, one of each kind the reader must see
    assert g.has_edge("kg.analyses.check", "kg.engine.rules")  # top-level from-import
    assert g.has_edge("kg.cli.export", "kg.output.diagrams.exportall")  # function-level import
    assert g.has_edge("kg.analyses.fixtures", "kg.analyses.diagnose")  # module named by a string (RUNNERS)
    assert g.has_edge("kg.inputs.launch", "kg.inputs.launch.docker")  # `from kg.inputs.launch import docker`
    assert len(g) == len(list(KG.rglob("*.py"))) - len(list((KG / "_data").rglob("*.py")))
    assert g.number_of_edges() > 150


def test_no_module_is_long_without_a_reason():
    assert MAX_LINES == 800
    for mod, why in LONG_MODULES.items():
        assert why.strip(), mod


# Files that still compare engine or framework names while their logic moves into kg/engines/<engine>/ and
# kg/frameworks/<framework>/ (issue 25): each must still have a comparison (fixing one takes it off the list), and no
# other file may gain one. None is left: the training launchers a framework owns (`deepspeed`, `accelerate launch`)
# come from its package (TrainingFramework.launchers), every serving-engine comparison is in kg/engines/.
ENGINE_BRANCH_ALLOWED: set[str] = set()
# functions in kg/analyses/ still over MAX_FUNCTION_LINES while they are split (each must still be long)
LONG_FUNCTIONS_ALLOWED: set[str] = set()


def test_no_engine_name_is_compared_outside_the_engine_packages():
    hits = engine_branches(KG)
    files = {h.split(":")[0] for h in hits}
    assert sorted(files - ENGINE_BRANCH_ALLOWED) == [], [h for h in hits if h.split(":")[0] not in ENGINE_BRANCH_ALLOWED]
    assert sorted(ENGINE_BRANCH_ALLOWED - files) == [], "no engine branch left there: take it off ENGINE_BRANCH_ALLOWED"


def test_no_function_in_the_analyses_is_long():
    assert MAX_FUNCTION_LINES == 120
    found = {f"{h.split(':')[0]}:{h.split(': ')[1].split(' (')[0]}" for h in long_functions(KG)}
    assert sorted(found - LONG_FUNCTIONS_ALLOWED) == [], long_functions(KG)
    assert sorted(LONG_FUNCTIONS_ALLOWED - found) == [], "short now: take it off LONG_FUNCTIONS_ALLOWED"


def test_model_fact_names_are_the_modelfacts_fields():
    """kg.knowledge.vocabulary.MODEL_FACT_NAMES lists what kg.inputs.modelcfg.ModelFacts holds (the
    knowledge layer may not import the inputs layer, so the names are written out and checked here)."""
    from kg.inputs.modelcfg import ModelFacts
    from kg.knowledge.vocabulary import MODEL_FACT_NAMES
    have = {f.name for f in dataclasses.fields(ModelFacts)}
    have |= {n for n, v in vars(ModelFacts).items() if isinstance(v, property)}
    assert set(MODEL_FACT_NAMES) == have, "add new ModelFacts fields to kg.knowledge.vocabulary.MODEL_FACT_NAMES"
    assert len(MODEL_FACT_NAMES) == len(set(MODEL_FACT_NAMES))


# ---------------------------------------------------------------------------------------------
# the checker catches what it should, on a copy of kg/ with one problem planted

@pytest.fixture
def kg_copy(tmp_path):
    dst = tmp_path / "kg"
    shutil.copytree(KG, dst, ignore=shutil.ignore_patterns("__pycache__", "_data", "*.pyc"))
    assert problems(dst) == []  # the copy is as clean as the original
    return dst


@pytest.fixture
def core_copy(tmp_path):
    """kg/core/ alone (no engine name in it): enough for the engine-branch and function-length checkers."""
    dst = tmp_path / "kg"
    shutil.copytree(KG / "core", dst / "core", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def _append(f: Path, code: str) -> None:
    f.write_text(f.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")


def test_a_planted_cycle_through_function_level_imports_is_reported(kg_copy):
    assert "kg.core.errors" not in _imports(kg_copy, "kg.core.paths")
    _append(kg_copy / "core" / "paths.py", "def _planted():\n    from kg.core.errors import OptkgError\n    return OptkgError")
    _append(kg_copy / "core" / "errors.py", "def _planted():\n    from kg.core import paths\n    return paths")
    found = problems(kg_copy)
    assert len(found) == 1, found
    assert found[0].startswith("import cycle: ")
    assert "kg.core.errors" in found[0] and "kg.core.paths" in found[0]
    assert "kg/core/errors.py:" in found[0] and "kg/core/paths.py:" in found[0]


def test_a_planted_upward_import_is_reported(kg_copy):
    _append(kg_copy / "knowledge" / "axes.py", "def _planted():\n    from kg.analyses.check import check_stack\n    return check_stack")
    found = problems(kg_copy)
    upward = [f for f in found if "kg.knowledge.axes (layer 2) imports kg.analyses.check (layer 6)" in f]
    assert len(upward) == 1 and upward[0].startswith("kg/knowledge/axes.py:"), found
    # an upward import closes a cycle too (kg.analyses.check imports the knowledge layer); nothing else
    assert all(f in upward or (f.startswith("import cycle: ") and "kg.knowledge.axes" in f) for f in found), found


def test_a_planted_import_of_the_cli_is_reported(kg_copy):
    _append(kg_copy / "output" / "report.py", "import kg.cli.common as _planted")
    found = problems(kg_copy)
    assert len(found) == 1, found
    assert "kg.output.report imports kg.cli.common: nothing outside kg.cli imports kg.cli" in found[0]


def test_an_upward_import_by_module_name_string_is_reported(kg_copy):
    _append(kg_copy / "engine" / "rules.py", '_PLANTED = {"check": "kg.analyses.check:run_fixture"}')
    found = problems(kg_copy)
    upward = [f for f in found if "kg.engine.rules (layer 1) imports kg.analyses.check (layer 6)" in f]
    assert len(upward) == 1, found
    assert all(f in upward or (f.startswith("import cycle: ") and "kg.engine.rules" in f) for f in found), found


def test_a_relative_upward_import_is_reported(kg_copy):
    _append(kg_copy / "derive" / "kv.py", "def _planted():\n    from ..output import report\n    return report")
    found = problems(kg_copy)
    upward = [f for f in found if "kg.derive.kv (layer 4) imports kg.output.report (layer 7)" in f]
    assert len(upward) == 1, found
    assert all(f in upward or (f.startswith("import cycle: ") and "kg.derive.kv" in f) for f in found), found


def test_a_planted_long_module_is_reported(kg_copy):
    (kg_copy / "core" / "planted.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    found = problems(kg_copy)
    assert found == [f"kg/core/planted.py: {MAX_LINES + 1} lines (over {MAX_LINES}): split it by job"]


def test_a_module_outside_the_layers_is_reported(kg_copy):
    (kg_copy / "misc.py").write_text("X = 1\n", encoding="utf-8")
    found = problems(kg_copy)
    assert len(found) == 1 and "kg.misc is in no layer" in found[0], found


def _imports(root: Path, mod: str) -> set[str]:
    return set(import_graph(root).successors(mod))


def test_test_files_are_named_by_behaviour_not_by_round():
    """A test file says what it protects (test_vllm_model_runner.py), never the round of work that wrote it
    (test_memory4_fixes.py, test_second_round_fixes_a.py): the before-stop hook's pattern, which holds none."""
    import re
    round_named = re.compile(r"^test_.*(fix|round|[0-9]_).*\.py$")
    tests = Path(__file__).resolve().parent
    assert sorted(f.name for f in tests.glob("test_*.py") if round_named.match(f.name)) == []
    assert round_named.match("test_memory4_fixes.py") and round_named.match("test_fit_second_round.py")


@pytest.mark.parametrize("code", [
    'def _planted(stack):\n    return stack.engine == "vllm"',
    'def _planted(engine):\n    return engine in ("sglang", "trtllm")',
    '_PLANTED_NAMES = frozenset({"lmdeploy"})\n\n\ndef _planted(engine):\n    return engine not in _PLANTED_NAMES',
    'def _planted(engine):\n    return {"vllm": 1, "sglang": 2}.get(engine)',
    'def _planted(name):\n    return name.startswith(("megatron", "x"))',
    'def _planted(engine):\n    match engine:\n        case "deepspeed":\n            return 1\n    return 0',
])
def test_a_planted_engine_branch_is_reported(core_copy, code):
    assert engine_branches(core_copy) == []
    _append(core_copy / "core" / "paths.py", code)
    found = engine_branches(core_copy)
    assert len(found) == 1 and found[0].startswith("kg/core/paths.py:"), found


def test_an_engine_package_may_name_its_engine(core_copy):
    for pkg in (core_copy / "engines" / "planted", core_copy / "frameworks" / "planted"):
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text('def _planted(engine):\n    return engine == "vllm"\n', encoding="utf-8")
    assert engine_branches(core_copy) == []


def test_a_planted_long_analysis_function_is_reported(core_copy):
    (core_copy / "analyses").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (core_copy / "analyses" / "planted.py").write_text(f"def planted():\n{body}\n", encoding="utf-8")
    assert long_functions(core_copy) == [f"kg/analyses/planted.py:1: planted ({MAX_FUNCTION_LINES + 1} lines)"]
    (core_copy / "analyses" / "planted.py").write_text(f"def planted():\n{body[:body.rindex(chr(10))]}\n")
    assert long_functions(core_copy) == []
