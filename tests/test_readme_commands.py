"""Every command block of README.md runs as written (tester defect: examples named placeholder files
such as ``ds_config.json``, ``path/to/config.json`` and ``x.yaml``).

The commands run from a temporary copy of the checkout (catalog/, rules/, examples/, docs/, exports/,
tests/fixtures/, a git repository with an ``origin/main`` ref, ``../shared`` beside it), so the ones
that write (``new``, ``export --all``, ``--diagram``) never touch the repository. Each must exit 0
(clean) or 1 (findings) and print no error; the Python blocks run in a fresh interpreter there.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from catalog_copy import env_for, optkg

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
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
    if not SHARED.is_dir():
        pytest.skip("../shared (the reference data beside the checkout) is not on this machine")
    root = tmp_path_factory.mktemp("readme")
    repo = root / "optkg"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("catalog", "rules", "examples", "docs", "exports", "tests/fixtures"):
        shutil.copytree(REPO / part, repo / part, ignore=ignore)
    (root / "shared").symlink_to(SHARED)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "readme"], ["update-ref", "refs/remotes/origin/main", "HEAD"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return repo


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_runs_as_written(checkout: Path, line: str):
    argv = shlex.split(line, comments=True)
    assert argv[0] == "optkg"
    r = optkg(argv[1:], checkout, cache=checkout.parent / "cache")
    assert r.returncode in (0, 1), f"{line}\nexit {r.returncode}\n{r.stderr}"
    assert "error" not in r.stderr, r.stderr
    assert (r.stdout + r.stderr).strip(), "printed nothing"
    if argv[1] == "new":  # the template it wrote is for the reader to fill; the other commands run without it
        (checkout / "catalog" / "techniques" / f"{argv[2]}.yaml").unlink()


@pytest.mark.parametrize("i", range(len(PYTHON)))
def test_readme_python_block_runs_as_written(checkout: Path, i: int):
    # the second block continues the first (same session: `kg`, `catalog` and `stack` are defined there)
    p = subprocess.run([sys.executable, "-c", "\n".join(PYTHON[: i + 1])], cwd=checkout, capture_output=True, text=True, timeout=300,
                       env=env_for(checkout, checkout.parent / "cache"))
    assert p.returncode == 0, p.stderr
