"""`optkg <command> --help` is plain text: no raw RST from the module docstrings (tester-3 item 18)."""
from __future__ import annotations

import re

import pytest

from conftest import run_cli
from kg.cli import COMMANDS, build_parser, plain_description

RST = re.compile(r"``|:(?:class|func|meth|mod|attr|data|ref):`")


def test_plain_description_drops_rst_markup():
    doc = "``optkg x LOG``: see :class:`kg.Stack` and :func:`~kg.derive.kv.kv_layout <layout>`\n  on two lines.\n\nMore."
    assert plain_description(doc, "fallback") == "optkg x LOG: see kg.Stack and kg.derive.kv.kv_layout on two lines."
    assert plain_description(None, "fallback") == "fallback"


def test_reconcile_help_is_plain_text():
    code, out, _ = run_cli("reconcile", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert ("optkg reconcile LOG [LOG ...] [--vllm CMD] [--sglang CMD]: optkg's memory estimate beside each number "
            "of an engine's startup log (kg.analyses.reconcile).") in flat
    assert not RST.search(out)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_help_shows_rst(command):
    sub = next(a for a in build_parser(command)._actions if a.dest == "command").choices[command]
    assert not RST.search(sub.format_help()), sub.format_help()
