"""One quantity, one percentage: fmt_pct rounds once, and the training memory line and rule message agree."""
from __future__ import annotations

from conftest import run_cli
from kg.core.numfmt import fmt_pct


def test_fmt_pct_rounds_once():
    # 1.13496 is 113 %; rounding to 3 decimals first (1.135) printed 114 % beside it
    assert fmt_pct(1.13496) == "113%" and fmt_pct(1.20549760540) == "121%"
    assert fmt_pct(0.5, 1) == "50.0%" and fmt_pct(None) == "-" and fmt_pct(float("inf")) == "inf"


def test_training_memory_percentage_is_one_number():
    # Llama-3.1-70B, TP 8, seq 4,096, micro-batch 1 on an H100-SXM (79.65 GiB): 96.01 GiB per GPU = 1.20550 of the
    # GPU -> 121 %. The rule rounded the fraction to 1.205 first and its message said 120 % under a 121 % total line.
    cmd = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 1 --bf16 --micro-batch-size 1 --global-batch-size 1024 --seq-length 4096 "
           "--use-distributed-optimizer")
    code, out, err = run_cli("check", "--train", cmd, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert "of 79.65 GiB (121%)" in out
    assert "against 79.65 GiB on the H100-SXM (121%)" in out and "(120%)" not in out
