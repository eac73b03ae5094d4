"""The adapter over aiconfigurator-core (NVIDIA, Apache-2.0): one serving point in, its timings out.

aiconfigurator-core estimates a forward pass from per-op latencies measured per GPU, engine and engine
release (its "database", ``systems/data/<system>/<op>/<backend>/<release>/``). optkg asks it for one
*aggregated* (in-flight batching) operating point: ``BaseBackend.run_agg`` (sdk/backends/base_backend.py
at 0.12.0) with ``batch_size`` running requests per attention-DP rank and ``ctx_tokens`` the engine's
chunked-prefill budget per step; it models mixed prefill + decode steps, the TTFT queuing of requests
arriving together, and for vLLM the Little's-law throughput cap (sdk/backends/vllm_backend.py).

Nothing here is imported by the CLI at start-up: ``aiconfigurator_core`` (numpy, pandas, pyarrow) is
imported on the first estimate that misses optkg's cache (kg.speed.serving). The model is always given
as a local folder holding optkg's config.json, so the estimator never reaches the model hub.

Errors: ``NotEvaluable(reason)`` for anything outside the estimator's coverage (package missing, GPU,
engine, quantisation, model family, ops without data); its text is shown to the user as
"not evaluable: <reason>".
"""
from __future__ import annotations


import contextlib
import functools
import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kg.core.lazyre import lazy_re

ADAPTER_VERSION = "3"  # bump when the adapter's mapping changes: part of every cache key
PACKAGE = "aiconfigurator-core"
TABLES = Path(__file__).with_name("tables.yaml")


class NotEvaluable(Exception):
    """The point is outside what the estimator covers; ``str(e)`` says why, for the user."""


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, Any]:
    """kg/speed/tables.yaml (optkg name -> estimator name per kind), served from the content-keyed cache."""
    from kg.core.cache import built_from

    def build():
        import yaml
        return yaml.safe_load(TABLES.read_text(encoding="utf-8"))
    return built_from("speed-tables", [TABLES], build)


@functools.lru_cache(maxsize=1)
def estimator_version() -> str | None:
    """The installed aiconfigurator-core release, or None when it is not installed: read from the name of its
    ``*.dist-info`` folder beside the package (neither the estimator nor importlib.metadata is imported)."""
    import importlib.util
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(list(spec.submodule_search_locations)[0]).parent
    found = sorted(site.glob("aiconfigurator_core-*.dist-info"))
    if len(found) != 1:
        from importlib import metadata
        try:
            return metadata.version(PACKAGE)
        except metadata.PackageNotFoundError:
            return None
    return found[0].name[len("aiconfigurator_core-"):-len(".dist-info")]


def require_estimator() -> str:
    v = estimator_version()
    if v is None:
        raise NotEvaluable(f"{PACKAGE} is not installed (pip install 'optkg[speed]')")
    return v


@dataclass(frozen=True)
class Point:
    """One aggregated operating point, in the estimator's terms (every field is part of the cache key).

    ``config_digest``: sha256 of the model's config.json bytes (``config_dir`` holds it as
    ``config.json``); parallel sizes as the estimator counts them (``tp_size`` is the attention TP size,
    ``attention_dp_size`` the DP-attention ranks, ``moe_tp_size * moe_ep_size == tp_size *
    attention_dp_size``); ``batch_size``: running requests per attention-DP rank and pipeline stage;
    ``isl`` / ``osl``: tokens; ``ctx_tokens``: prefill tokens per engine step (chunked-prefill budget);
    ``release``: the database release (already mapped, kg.speed.releases).
    """

    model: str
    config_digest: str
    system: str
    backend: str
    release: str
    tp_size: int
    pp_size: int
    attention_dp_size: int
    moe_tp_size: int
    moe_ep_size: int
    gemm_quant_mode: str | None
    moe_quant_mode: str | None
    kvcache_quant_mode: str | None
    batch_size: int
    isl: int
    osl: int
    ctx_tokens: int
    memory_fraction: float | None = None

    def key(self) -> str:
        """Content key: every field + the estimator's and the adapter's versions."""
        blob = json.dumps({**asdict(self), "estimator": estimator_version(), "adapter": ADAPTER_VERSION},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


def model_dir(files: dict[str, bytes], root: Path) -> tuple[Path, str]:
    """A folder under ``root`` holding ``files`` (``config.json`` and, for ModelOpt checkpoints,
    ``hf_quant_config.json``), named by their digest; returns (folder, sha256). The estimator reads a local
    folder's config.json and never the hub (sdk/utils.py _load_model_config_from_model_path: ``os.path.isdir``
    first)."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    digest = h.hexdigest()
    d = root / f"model-{digest[:24]}"
    for name, raw in files.items():
        f = d / name
        if f.is_file() and not f.is_symlink() and f.read_bytes() == raw:
            continue
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = d / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(raw)
        os.replace(tmp, f)
    return d, digest


@contextlib.contextmanager
def _quiet():
    """The estimator logs every low-fidelity table it loads at WARNING; optkg reports coverage itself."""
    import logging  # only around an estimate that misses the cache (a warm check does not load logging)
    lg = logging.getLogger("aiconfigurator_core")
    old = lg.level
    lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        lg.setLevel(old)


@functools.lru_cache(maxsize=64)
def version_slots(system: str, backend: str) -> tuple[str, ...]:
    """The database releases the estimator answers for (system, backend), oldest first: its queryable
    slots (systems/query_versions.yaml: previous, current, and the derived next)."""
    require_estimator()
    with _quiet():
        from aiconfigurator_core.sdk import perf_database
        slots = perf_database.get_version_slots(system, backend) or {}
        return tuple(sorted(set(slots.values()), key=perf_database._version_sort_tuple))


_MODELS: dict[tuple, Any] = {}


def _model(p: Point, path: str, db):
    """The estimator's model for ``p``, resolved as its own estimate path does (aiconfigurator
    cli/api.py ``_run_agg_estimate``: ``resolve_context_fmha_by_data`` picks the context-attention quant mode
    the database has data for, ``resolve_dsv4_moe_arch`` the arch-specific MoE mode, ``resolve_nvfp4_for_system``
    NVFP4 as weight-only below Blackwell), so optkg times the same ops the estimator's authors validate."""
    k = (path, p.system, p.backend, p.release, p.tp_size, p.pp_size, p.attention_dp_size, p.moe_tp_size,
         p.moe_ep_size, p.gemm_quant_mode, p.moe_quant_mode, p.kvcache_quant_mode)
    if k not in _MODELS:
        from aiconfigurator_core.sdk.config_builders import build_model_config
        from aiconfigurator_core.sdk.models import get_model
        from aiconfigurator_core.sdk.models.helpers import (resolve_context_fmha_by_data, resolve_dsv4_moe_arch,
                                                            resolve_nvfp4_for_system)
        mc = build_model_config(tp_size=p.tp_size, pp_size=p.pp_size, attention_dp_size=p.attention_dp_size,
                                moe_tp_size=p.moe_tp_size, moe_ep_size=p.moe_ep_size,
                                gemm_quant_mode=p.gemm_quant_mode, moe_quant_mode=p.moe_quant_mode,
                                kvcache_quant_mode=p.kvcache_quant_mode)
        resolve_context_fmha_by_data(mc, path, db, p.backend, is_context_role=True)
        resolve_dsv4_moe_arch(mc, path, system_name=p.system, backend_name=p.backend)
        resolve_nvfp4_for_system(mc, p.system, path)
        _MODELS[k] = get_model(path, mc, p.backend)
    return _MODELS[k]


def _database(system: str, backend: str, release: str):
    from aiconfigurator_core.sdk import perf_database
    db = perf_database.get_database(system, backend, release)
    if db is None:
        raise NotEvaluable(f"the estimator has no {backend} {release} database for {system}")
    return db


_MISSING = lazy_re(r"^(?:perf database error: )?(?P<what>[\w ]+?) (?:perf )?data missing for (?:\w+Key )?"
                      r"(?:\{(?P<key>[^}]*)\}|(?P<rest>.*?)(?= at /|$))(?: at /\S*)?(?: available: \[(?P<have>[^\]]*)\]?)?.*$")


_BLOCK_SHAPE = lazy_re(r"^(?:.*?: )?Invalid quantized MoE configuration: \(moe_intermediate_size=(?P<i>\d+) / "
                          r"moe_tp_size=(?P<t>\d+)\) % weight_block_size=(?P<b>\d+) != 0\.?\s*$")


def _reason(e: BaseException, p: "Point | None" = None) -> str:
    """A one-line reason from an estimator exception: its first line, trimmed, read into words (``tidy_reason``)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return tidy_reason(text, p)[:240]


def tidy_reason(text: str, p: "Point | None" = None) -> str:
    """The estimator's missing-data message read into words, its install path dropped: ``MoE data missing for
    MoeKey { quant: "fp8", topk: 8, ... } at /…/site-packages/…`` -> ``no measured MoE data for quant fp8, topk 8,
    … in the h200_sxm sglang 0.5.6 database``. Idempotent, so reasons cached in the old wording read the same."""
    head, sep, raw = text.partition(": perf database error: ")
    raw = "perf database error: " + raw if sep else text
    m = _MISSING.match(raw)
    if m:
        if m.group("key") is not None:
            fields = re.findall(r'(\w+): "?([^",]+?)"?\s*(?:,|$)', m.group("key").strip())
            what = ", ".join(f"{k} {v}" for k, v in fields)
        else:
            what = " ".join(m.group("rest").split())
        where = f" in the {p.system} {p.backend} {p.release} database" if p is not None else ""
        have = ", ".join(x.strip(' "\'') for x in (m.group("have") or "").split(",") if x.strip(' "\''))
        raw = f"no measured {m.group('what')} data for {what}{where}" + (f" (it has {have})" if have else "")
        text = f"{head}: {raw}" if sep else raw
    b = _BLOCK_SHAPE.match(text)
    if b:  # aiconfigurator-core 0.12.0 sdk/models/moe.py:371-376 refuses an unaligned block-scaled FP8 expert shard
        i, t, blk = (int(b.group(k)) for k in "itb")
        return (f"block-scaled FP8 experts (fp8_block): moe_intermediate_size {i:,} / moe_tp_size {t} = {i / t:,g} "
                f"columns per GPU is not a multiple of the {blk}-wide weight block, a shape the estimator does not "
                "time; per-tensor FP8 timings are not substituted")
    return re.sub(r" at /\S+", "", text)


def run_point(p: Point, model_path: str) -> dict[str, Any]:
    """Estimate ``p`` (``model_path``: the folder holding its config.json). Returns plain data:
    ``ttft_ms``, ``tpot_ms`` (ms per output token after the first), ``output_tokens_per_s`` (whole
    worker), ``tokens_per_s_per_gpu``, ``tokens_per_s_per_user``, ``request_latency_ms``,
    ``memory_gib`` (the estimator's own per-GPU total), ``estimator_oom`` / ``estimator_kv_oom`` (its
    memory verdicts, reported beside optkg's), ``release``. Raises NotEvaluable."""
    require_estimator()
    if not Path(model_path, "config.json").is_file():  # never let the estimator fall back to the hub
        raise NotEvaluable(f"no local config.json for {p.model}")
    with _quiet():
        try:
            from aiconfigurator_core.sdk.backends.factory import get_backend
            from aiconfigurator_core.sdk.config import RuntimeConfig
            db = _database(p.system, p.backend, p.release)
            model = _model(p, model_path, db)
            # a fresh backend per call: BaseBackend.run_agg memoises summaries keyed by (isl, osl, batch,
            # ctx_tokens) only, not by the model, so a shared one answers for the previous model
            be = get_backend(p.backend)
            kw = {"free_gpu_memory_fraction": p.memory_fraction} if p.memory_fraction is not None else {}
            s = be.run_agg(model, db, RuntimeConfig(batch_size=p.batch_size, isl=p.isl, osl=p.osl),
                           ctx_tokens=p.ctx_tokens, **kw)
            r = s.get_result_dict()
            oom, kv_oom = bool(s.check_oom()), bool(s.check_kv_cache_oom())
        except NotEvaluable:
            raise
        except NotImplementedError as e:
            raise NotEvaluable(f"the estimator does not model this layout: {_reason(e)}") from None
        except (ValueError, KeyError, TypeError, AssertionError, RuntimeError, OSError, ZeroDivisionError) as e:
            raise NotEvaluable(f"the estimator has no data for this point: {_reason(e, p)}") from None
    out = {"ttft_ms": float(r["ttft"]), "tpot_ms": float(r["tpot"]),
           "output_tokens_per_s": float(r["tokens/s"]), "tokens_per_s_per_gpu": float(r["tokens/s/gpu"]),
           "tokens_per_s_per_user": float(r["tokens/s/user"]), "request_latency_ms": float(r["request_latency"]),
           "memory_gib": float(r["memory"]), "estimator_oom": oom, "estimator_kv_oom": kv_oom,
           "release": str(r["version"])}
    if not all(math.isfinite(v) for v in out.values() if isinstance(v, float)) or out["tpot_ms"] <= 0:
        raise NotEvaluable("the estimator returned no finite timing for this point")
    return out


def _parse(v: str | None):
    from packaging.version import InvalidVersion, Version
    try:
        return Version(str(v)) if v else None
    except InvalidVersion:
        return None


def database_release(system: str, backend: str, engine_release: str | None) -> tuple[str, str | None]:
    """The database release to time ``engine_release`` with, and a note when it is not that release.

    Rule: the newest queryable release at or before the engine's (kernels and scheduler of an older
    release are the closest measured stand-in for a newer one); when the engine is older than every
    queryable release, the oldest one. No release given (or one that is not a version): the estimator's
    ``current`` slot. Raises NotEvaluable when the estimator has no release at all for the pair."""
    slots = version_slots(system, backend)
    if not slots:
        raise NotEvaluable(f"the estimator has no {backend} database for {system}")
    want = _parse(engine_release)
    if want is None:
        with _quiet():
            from aiconfigurator_core.sdk import perf_database
            cur = (perf_database.get_version_slots(system, backend) or {}).get("current") or slots[-1]
        why = f"release {engine_release!r} is not a version" if engine_release else "no engine release given"
        return cur, f"{why}: timed with the database's current {backend} release {cur}"
    older = [s for s in slots if _parse(s) is not None and _parse(s) <= want]
    pick = older[-1] if older else slots[0]
    if _parse(pick) == want:
        return pick, None
    rel = "older" if older else "newer"
    return pick, (f"{backend} {engine_release} timed with the database's {backend} {pick} measurements (the nearest "
                  f"{rel} release it has for {system}; it has {', '.join(slots)})")
