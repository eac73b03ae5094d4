"""Every command block of README.md runs as written (tester defect: examples named placeholder files
such as ``ds_config.json``, ``path/to/config.json`` and ``x.yaml``).

The commands run from a temporary copy of the checkout (catalog/, rules/, examples/, docs/, exports/,
tests/fixtures/, a git repository with an ``origin/main`` ref; the example data is examples/data), so the ones
that write (``new``, ``export --all``, ``--diagram``) never touch the repository. Each must exit 0
(clean) or 1 (findings) and print no error; the Python blocks run in a fresh interpreter there.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from catalog_copy import env_for, optkg

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the checkout copy (35 MB, a git commit) and its catalog are built once
pytestmark = pytest.mark.xdist_group("readme")

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)
# command lines, not the sample output (which starts "optkg check: <stack name>")
COMMANDS = [line for lang, body in BLOCKS if not lang for line in body.splitlines() if re.match(r"optkg [a-z]+( |$)", line)]
PYTHON = [body for lang, body in BLOCKS if lang == "python"]


def test_the_readme_blocks_were_found():
    # the blocks above are what the tests below run: every `optkg ...` line, both Python blocks
    assert len(COMMANDS) >= 25 and len(PYTHON) == 2
    assert not [c for c in COMMANDS if re.search(r"path/to/|\bx\.yaml|ds_config\.json|my-[a-z-]+\.yaml|\|", c)]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    repo = root / "optkg"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("catalog", "rules", "examples", "docs", "exports", "tests/fixtures"):
        shutil.copytree(REPO / part, repo / part, ignore=ignore)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "readme"], ["update-ref", "refs/remotes/origin/main", "HEAD"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return repo


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_runs_as_written(checkout: Path, line: str):
    argv = shlex.split(line, comments=True)
    assert argv[0] == "optkg"
    r = optkg(argv[1:], checkout)  # the session's content-keyed cache: speed points the other tests built serve
    assert r.returncode in (0, 1), f"{line}\nexit {r.returncode}\n{r.stderr}"
    assert "error" not in r.stderr, r.stderr
    assert (r.stdout + r.stderr).strip(), "printed nothing"
    if argv[1] == "check" and "--format" not in argv:  # output for people fits 100 columns
        wide = [x for x in r.stdout.splitlines() if len(x) > 100]
        assert not wide, f"{line}\n{len(wide)} line(s) over 100 columns, e.g. {wide[0]!r}"
    if argv[1] == "new":  # the template it wrote is for the reader to fill; the other commands run without it
        (checkout / "catalog" / "techniques" / f"{argv[2]}.yaml").unlink()


@pytest.mark.parametrize("i", range(len(PYTHON)))
def test_readme_python_block_runs_as_written(checkout: Path, i: int):
    # the second block continues the first (same session: `kg`, `catalog` and `stack` are defined there)
    p = subprocess.run([sys.executable, "-c", "\n".join(PYTHON[: i + 1])], cwd=checkout, capture_output=True, text=True, timeout=300,
                       env=env_for(checkout, Path(os.environ["OPTKG_CACHE_DIR"])))
    assert p.returncode == 0, p.stderr


def _demo_command() -> list[str]:
    """The optkg arguments of the Makefile's `demo:` recipe (`$(BIN)/optkg check ... || test $$? -eq 1`)."""
    recipe = re.search(r"^demo:.*\n\t(.+)$", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.M).group(1)
    words = shlex.split(recipe.split("||")[0])
    assert words[0].endswith("/optkg"), recipe
    return words[1:]


def shown_lines_match(shown: list[str], real: list[str]) -> str | None:
    """None when every line of ``shown`` is a line of ``real`` in order; else the first line that is not.

    A `...` line stands for lines left out (without one, the next shown line must be the next real line);
    a line ending in ` [...]`, ` <...>` or ` ...` stands for a real line starting with the text before it."""
    j, gap = 0, True
    for line in shown:
        if line == "...":
            gap = True
            continue
        prefix = next((line[: -len(m)] for m in (" [...]", " <...>", " ...") if line.endswith(m)), None)
        ok = (lambda r: r.startswith(prefix)) if prefix is not None else (lambda r: r == line)  # noqa: E731
        while gap and j < len(real) and not ok(real[j]):
            j += 1
        if j >= len(real) or not ok(real[j]):
            return line
        j, gap = j + 1, False
    return None


def test_readme_demo_output_is_what_make_demo_prints(monkeypatch, capsys):
    # the README shows `make demo`'s output abridged; every line it shows must be printed, in that order, now
    from kg.cli import main
    block = README.split("`make demo` prints", 1)[1].split("```\n", 2)[1]
    shown = block.splitlines()
    assert len([x for x in shown if x != "..."]) >= 30
    monkeypatch.chdir(REPO)
    code = main(_demo_command())
    real = capsys.readouterr().out.splitlines()
    assert code in (0, 1)
    assert shown_lines_match(shown, real) is None, shown_lines_match(shown, real)
    assert real[-1] == shown[-1]  # the summary line in full


def test_shown_lines_match_fails_on_a_stale_line():
    real = ["a", "b 1 [x]", "c", "d"]
    assert shown_lines_match(["a", "b 1 [...]", "...", "d"], real) is None
    assert shown_lines_match(["a", "c"], real) == "c"  # a left-out line needs `...`
    assert shown_lines_match(["a", "...", "d 2"], real) == "d 2"
    assert shown_lines_match(["b 2 [...]"], real) == "b 2 [...]"
