"""Where a sweep's combinations are evaluated: this process, worker processes, or Ray tasks.

Every executor evaluates the same ``kg.analyses.sweep.Evaluator.evaluate(i)`` for each combination index
``i`` of the Plan and returns the rows in index order, so the ranked result is the same whichever ran it
(tests/test_sweep_executors.py runs a sweep through each and compares them).

- ``inline``: a loop in this process (what a small sweep uses: no start-up cost).
- ``local`` (the CLI's default): ``concurrent.futures.ProcessPoolExecutor`` with ``jobs`` workers (default:
  the CPUs this process may use); each worker loads the catalog and rules once (from optkg's cache) and
  evaluates chunks of indices. Sweeps under ``LOCAL_MIN`` combinations run inline.
- ``ray``: Ray (``pip install 'optkg[ray]'``) on the cluster at ``address``, or a local Ray started
  here with ``jobs`` CPUs. The Plan (base stack, axes, workload) is put in the object store once
  (``ray.put``); each task evaluates one chunk of ~``CHUNK`` indices (coarse tasks: Ray's guidance
  against tiny tasks) and results are collected as they finish (``ray.wait``).

A progress bar (tqdm, already installed with huggingface_hub) goes to stderr when ``progress`` is true.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from kg.core.errors import OptkgError

EXECUTORS = ("inline", "local", "ray")
LOCAL_MIN = 200
CHUNK = 500

_EVALUATORS: dict[str, Any] = {}  # per worker process: plan key -> Evaluator


def _chunks(n: int, workers: int) -> list[range]:
    size = max(16, min(CHUNK, -(-n // (workers * 4))))
    return [range(a, min(n, a + size)) for a in range(0, n, size)]


def _bar(n: int, progress: bool):
    from tqdm import tqdm
    return tqdm(total=n, disable=not progress, file=sys.stderr, unit="stack", desc="sweep", leave=False)


def _worker_rows(plan, key: str, idx: range) -> list[dict[str, Any]]:
    """Evaluate ``idx`` in a worker (the Evaluator is built once per worker and plan)."""
    from kg.analyses.sweep_eval import Evaluator
    ev = _EVALUATORS.get(key)
    if ev is None:
        _EVALUATORS.clear()
        ev = _EVALUATORS[key] = Evaluator(plan)
    from kg.core.parallel import frozen_gc
    with frozen_gc():
        return [ev.evaluate(i) for i in idx]


def _plan_key(plan) -> str:
    import hashlib
    import pickle
    return hashlib.sha256(pickle.dumps(plan)).hexdigest()


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_plan(plan, ev, executor: str = "inline", jobs: int | None = None, address: str | None = None,
             progress: bool = False, done: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Rows of every combination of ``plan`` in index order (``ev``: this process's Evaluator). ``done``: the rows of
    the first combinations, already evaluated by ``ev`` (the time estimate's), which this process does not repeat."""
    if executor not in EXECUTORS:
        raise OptkgError(f"--executor: expected one of {', '.join(EXECUTORS)}, found {executor!r}")
    if jobs is not None and jobs < 1:
        raise OptkgError(f"--jobs: expected a positive integer, found {jobs}")
    n = plan.size()
    if executor == "ray":
        return _run_ray(plan, n, jobs, address, progress)
    if address is not None:
        raise OptkgError("--address goes with --executor ray")
    workers = jobs or cpus()
    if executor == "inline" or n < LOCAL_MIN or workers == 1:
        rows = list(done or [])[:n]
        with _bar(n, progress) as bar:
            bar.update(len(rows))
            for i in range(len(rows), n):
                rows.append(ev.evaluate(i))
                bar.update()
        return rows
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    key = _plan_key(plan)
    parts = _chunks(n, workers)
    out: list[list[dict[str, Any]] | None] = [None] * len(parts)
    # spawn: workers import optkg afresh (a forked copy of the durable-rules engine is not ours to share)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool, _bar(n, progress) as bar:
        futs = {pool.submit(_worker_rows, plan, key, part): j for j, part in enumerate(parts)}
        for f in as_completed(futs):
            out[futs[f]] = f.result()
            bar.update(len(parts[futs[f]]))
    return [r for part in out for r in part or []]


def _run_ray(plan, n: int, jobs: int | None, address: str | None, progress: bool) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise OptkgError("--executor ray needs Ray: pip install 'optkg[ray]'") from None
    started = False
    if not ray.is_initialized():
        env = {k: v for k, v in os.environ.items() if k.startswith("OPTKG_") or k in ("HOME", "HF_HOME")}
        kw: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": False}
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=jobs or cpus(), include_dashboard=False, **kw)
        started = True
    try:
        task = ray.remote(_worker_rows)
        plan_ref = ray.put(plan)
        key = _plan_key(plan)
        parts = _chunks(n, jobs or max(1, int(ray.cluster_resources().get("CPU", 1))))
        pending = {task.remote(plan_ref, key, part): j for j, part in enumerate(parts)}
        out: list[list[dict[str, Any]] | None] = [None] * len(parts)
        with _bar(n, progress) as bar:
            waiting = list(pending)
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                j = pending[done[0]]
                out[j] = ray.get(done[0])
                bar.update(len(parts[j]))
        return [r for part in out for r in part or []]
    finally:
        if started:
            ray.shutdown()
