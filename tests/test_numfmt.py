"""kg.core.numfmt: one formatter, one named style per output; each style writes exactly what the
formatter it replaced wrote (report._num, formats._num, diagnose._fmt, fitreport._n, sweep._n,
export._fmt_num), value by value, worked out from the format specifications."""
from __future__ import annotations

import math

import pytest

from kg.core.numfmt import DIAGNOSE, DIAGRAM, FIT, REPORT, SWEEP, NumStyle, fmt_num

#        value        REPORT          DIAGNOSE       FIT               SWEEP         DIAGRAM
CASES = [
    (None,            "None",         "-",           "-",              "-",          "None"),
    (True,            "true",         "yes",         "yes",            "True",       "true"),
    (False,           "false",        "no",          "no",             "False",      "false"),
    (0,               "0",            "0",           "0",              "0",          "0"),
    (12345,           "12,345",       "12,345",      "12,345",         "12,345",     "12,345"),
    (-7,              "-7",           "-7",          "-7",             "-7",         "-7"),
    (0.0,             "0",            "0",           "0",              "0",          "0"),
    (-0.0,            "0",            "-0",          "0",              "0",          "0"),
    (3.0,             "3",            "3",           "3",              "3",          "3"),
    (0.5,             "0.5",          "0.5",         "0.5",            "0.5",        "0.5"),
    (2 / 3,           "0.6667",       "0.6667",      "0.6667",         "0.67",       "0.6667"),
    (99.99,           "99.99",        "99.99",       "99.99",          "99.99",      "99.99"),
    (100.25,          "100.2",        "100.2",       "100.2",          "100.25",     "100.2"),
    (1234.5678,       "1,235",        "1,235",       "1,234.6",        "1,234.57",   "1235"),
    (12345.678,       "12,346",       "1.235e+04",   "12,345.7",       "12,345.68",  "1.235e+04"),
    (1e15,            "1,000,000,000,000,000", "1,000,000,000,000,000", "1,000,000,000,000,000.0",
     "1,000,000,000,000,000", "1,000,000,000,000,000"),
    (1e-05,           "1e-05",        "1e-05",       "1e-05",          "0",          "1e-05"),
    (math.inf,        "inf",          "inf",         "inf",            "inf",        "inf"),
    (math.nan,        "nan",          "nan",         "nan",            "nan",        "nan"),
    ([1, 2.5],        "{1, 2.5}",     "[1, 2.5]",    "[1, 2.5]",       "[1, 2.5]",   "{1, 2.5}"),
    ((8, 16),         "(8, 16)",      "(8, 16)",     "(8, 16)",        "(8, 16)",    "{8, 16}"),
    ("auto",          "auto",         "auto",        "auto",           "auto",       "auto"),
]
STYLES = {"REPORT": REPORT, "DIAGNOSE": DIAGNOSE, "FIT": FIT, "SWEEP": SWEEP, "DIAGRAM": DIAGRAM}


@pytest.mark.parametrize("name", list(STYLES))
def test_each_style_writes_what_its_old_formatter_wrote(name):
    col = list(STYLES).index(name) + 1
    got = [fmt_num(c[0], STYLES[name]) for c in CASES]
    assert got == [c[col] for c in CASES]


def test_style_options_compose():
    assert fmt_num(2 / 3, FIT.but(sig=2)) == "0.67"
    assert fmt_num(1234.5, NumStyle(group=False)) == "1234"  # %.4g, no separators
    assert fmt_num(0.125, NumStyle(fixed=1)) == "0.1"
    assert fmt_num([True, None], NumStyle(seqs=(list,), none="-")) == "{true, -}"
    assert REPORT.but(sig=3) != REPORT and REPORT.sig == 4


def test_the_outputs_use_the_formatter():
    """Every text output that prints numbers goes through fmt_num (no second formatter left)."""
    import inspect

    import kg.output.diagnose_report
    import kg.output.diagrams.stack
    import kg.output.fitreport
    import kg.output.formats
    import kg.output.report
    import kg.output.sweep_report
    for mod, style in ((kg.output.report, "REPORT"), (kg.output.formats, "REPORT"), (kg.output.diagnose_report, "DIAGNOSE"),
                       (kg.output.fitreport, "FIT"), (kg.output.sweep_report, "SWEEP"), (kg.output.diagrams.stack, "DIAGRAM")):
        src = inspect.getsource(mod)
        assert "fmt_num(" in src and f", {style})" in src, mod.__name__
        for old in ("def _num(", "def _fmt(", "def _n(", "def _fmt_num("):
            assert old not in src, (mod.__name__, old)
