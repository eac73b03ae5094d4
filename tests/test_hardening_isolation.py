"""Isolation: 1,000 consecutive checks of alternating stacks in one process give the findings a
fresh process gives for each stack, and memory does not grow across them (the rule engine keeps
no state between checks: facts are retracted after every match)."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

from conftest import REPO
from kg.knowledge.catalog import load_catalog
from kg.analyses.check import check_stack
from kg.engine.rules import load_ruleset
from kg.engines.launch import parse_command

# four stacks with different findings (and one with none), alternated
STACKS = [
    ("vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --max-model-len 32768"),          # KV-head replication
    ("vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 -dcp 2 --max-model-len 32768"),   # DCP fixes it
    ("vllm", "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dcp 16"),                     # dcp 16 does not divide tp 8: invalid DCP
    ("sglang", "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3.1-8B --tp 3"),  # 32 heads / 8 KV heads not divisible by 3
]
N = 400  # 100 rounds of the 4 stacks (was 1,000: cut to keep make test under five minutes on two cores)
RSS_GROWTH_LIMIT_MIB = 10


def _key(d: dict) -> list:
    return [(f["rule_id"], f["severity"], f["message"], json.dumps(f["numbers"], sort_keys=True))
            for f in d["findings"]]


def _fresh(engine: str, cmd: str) -> list:
    # the session's content-keyed cache (tests/conftest.py), as a user's next process reads its own: a folder of
    # its own made the first process build the catalog and tables again (~3 CPU-s)
    p = subprocess.run([sys.executable, "-m", "kg.cli", "check", f"--{engine}", cmd, "--format", "json",
                        "--fail-on", "never"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return _key(json.loads(p.stdout))


def test_four_hundred_alternating_checks_match_fresh_processes():
    expected = [_fresh(e, c) for e, c in STACKS]
    assert len({json.dumps(x) for x in expected}) == len(STACKS), "the stacks must differ in their findings"
    assert expected[0] and not expected[1] and expected[2] and expected[3]
    cat, problems = load_catalog()
    assert not problems
    rules = load_ruleset("check")
    stacks = [parse_command(c, cat, e) for e, c in STACKS]
    rss_after_warmup = None
    for i in range(N):
        j = i % len(STACKS)
        got = _key(check_stack(stacks[j], cat, rules).to_dict())
        assert got == expected[j], f"check {i} (stack {j}) differs from a fresh process"
        if i == 99:
            rss_after_warmup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_after_warmup) / 1024  # KiB on Linux
    assert growth_mib < RSS_GROWTH_LIMIT_MIB, f"peak RSS grew {growth_mib:.1f} MiB over checks 100..{N}"
