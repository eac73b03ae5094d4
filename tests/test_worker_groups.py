"""`make test`'s two xdist workers: a module marked ``pytest.mark.xdist_group`` runs on one worker (its module
fixtures built once), whatever pytest does with the nodeids xdist would have tagged (tests/conftest.py)."""
from __future__ import annotations

import re

from conftest import HEAVY_FIRST, REPO, module_group, work_unit


def test_every_group_mark_is_one_the_scheduler_reads():
    # a mark in another form (on a function, a class, a list of marks) would be silently split over the workers
    marked = {p.name: module_group(p) for p in sorted((REPO / "tests").glob("test_*.py"))
              if re.search(r"^[^#\n]*xdist_group\(", p.read_text(encoding="utf-8"), re.M)}
    assert [name for name, group in marked.items() if group is None] == []
    assert {"test_hardening_determinism.py": "hash-seeds", "test_site_browser.py": "browser",
            "test_readme_commands.py": "readme", "test_sweep_incremental.py": "sweep-incremental"}.items() <= marked.items()


def test_a_marked_module_is_one_unit_and_other_tests_are_units_of_their_own():
    groups: dict[str, str | None] = {}
    assert work_unit(REPO, "tests/test_site_browser.py::test_map_renders_all_techniques", groups) == "group:browser"
    assert work_unit(REPO, "tests/test_site_browser.py::test_text_contrast_is_at_least_4_5[report.html]",
                     groups) == "group:browser"
    assert work_unit(REPO, "tests/test_hardening_determinism.py::test_same_bytes_under_two_hash_seeds[gaps-json]",
                     groups) == "group:hash-seeds"
    assert work_unit(REPO, "tests/test_engine_stress.py::test_partitioning_at_ten_times_the_shipped_rules", groups) is None
    assert groups == {"tests/test_site_browser.py": "browser", "tests/test_hardening_determinism.py": "hash-seeds",
                      "tests/test_engine_stress.py": None}


def test_the_heavy_modules_listed_first_exist():
    # a renamed module would drop back to collection order (the end of the alphabet is the end of the run)
    assert [n for n in HEAVY_FIRST if not (REPO / "tests" / n).is_file()] == []
