"""The serving workload a speed estimate is for, and its command-line flags (shared by check and sweep)."""
from __future__ import annotations

from kg.core.errors import OptkgError
from kg.speed.serving import DEFAULT_CONCURRENCY, DEFAULT_ISL, DEFAULT_OSL, Workload

MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_000_000


def add_workload_arguments(p) -> None:
    """--concurrency (the stack arguments already have --isl / --osl: kg.cli.common.add_stack_args)."""
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="N",
                   help=f"speed: requests the clients keep in flight (default: {DEFAULT_CONCURRENCY}; with --isl / "
                        f"--osl, default {DEFAULT_ISL:,} / {DEFAULT_OSL:,} tokens per request)")


def workload_from_args(args) -> Workload:
    """A checked Workload from --isl / --osl (defaults when neither is given) and --concurrency; OptkgError naming
    the flag for a value out of range."""
    isl = DEFAULT_ISL if getattr(args, "isl", None) is None else args.isl
    osl = DEFAULT_OSL if getattr(args, "osl", None) is None else args.osl
    for flag, v, hi in (("--isl", isl, MAX_TOKENS), ("--osl", osl, MAX_TOKENS),
                        ("--concurrency", args.concurrency, MAX_CONCURRENCY)):
        if v < 1 or v > hi:
            raise OptkgError(f"{flag}: expected an integer from 1 to {hi:,}, found {v}")
    if osl < 2:
        raise OptkgError("--osl: expected at least 2 output tokens (ITL is the time between two of them)")
    return Workload(isl, osl, args.concurrency)
