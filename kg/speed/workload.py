"""The serving workload a speed estimate is for, and its command-line flags (shared by check and sweep)."""
from __future__ import annotations

from kg.core.errors import OptkgError
from kg.speed.serving import DEFAULT_CONCURRENCY, DEFAULT_ISL, DEFAULT_OSL, Workload

MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_000_000


def add_workload_arguments(p) -> None:
    """--isl / --osl / --concurrency (defaults shown in --help)."""
    p.add_argument("--isl", type=int, default=DEFAULT_ISL, metavar="TOKENS",
                   help=f"speed: input tokens per request (default: {DEFAULT_ISL:,})")
    p.add_argument("--osl", type=int, default=DEFAULT_OSL, metavar="TOKENS",
                   help=f"speed: output tokens per request (default: {DEFAULT_OSL:,})")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="N",
                   help=f"speed: requests the clients keep in flight (default: {DEFAULT_CONCURRENCY})")


def workload_from_args(args) -> Workload:
    """A checked Workload; OptkgError naming the flag for a value out of range."""
    for flag, v, hi in (("--isl", args.isl, MAX_TOKENS), ("--osl", args.osl, MAX_TOKENS),
                        ("--concurrency", args.concurrency, MAX_CONCURRENCY)):
        if v < 1 or v > hi:
            raise OptkgError(f"{flag}: expected an integer from 1 to {hi:,}, found {v}")
    if args.osl < 2:
        raise OptkgError("--osl: expected at least 2 output tokens (ITL is the time between two of them)")
    return Workload(args.isl, args.osl, args.concurrency)
