"""``make accuracy``: optkg's serving speed against measured end-to-end rows, beside the bare estimator.

Measured data: aiconfigurator-core's ``systems/silicon_sample.csv`` (5,221 rows of TTFT and TPOT measured
per model x GPU x engine release x parallel layout x ISL/OSL x concurrency; read from the installed
package). Aggregated rows are scored; disaggregated ones are counted as "not evaluable: disaggregated
serving (prefill and decode workers) is not modelled by optkg's check" - optkg checks one engine.

Split (tools/accuracy/split.csv, committed, never refitted): every row belongs to a configuration group
(mode, model, GPU, engine, release, precision, quant modes, parallel sizes); a group is held out when
``int(sha256(group)[:8], 16) % 10 < 3``, else train. All rows of a group (its ISL/OSL/concurrency
points) share a split, so no configuration is seen in both. Nothing is fitted on held-out rows.

Per row, three numbers side by side:
- measured: ``silicon_ttft_ms`` / ``silicon_tpot_ms``;
- bare estimator: ``run_agg`` at the database's ``current`` release with ``batch_size`` = concurrency /
  (pp x attention_dp) and 8,192 prefill tokens per step (what a user of aiconfigurator-core gets);
- optkg: the row as an optkg stack (launch command of its engine, its release, GPU and layout; the
  model's config.json) through ``check`` and kg.speed.serving: infeasible stacks get a reason, running
  requests are capped by optkg's KV capacity and the engine's cap (the rest queue), the release is mapped
  to the nearest database release, the engine's own prefill budget is used.

Output: ``docs/speed-accuracy.md`` (MAPE of TTFT and TPOT per engine x GPU on both splits, the rows where
KV capacity binds, the infeasible and not-evaluable rows with reasons, coverage) and, with ``--csv``, every
row. ``--check`` only verifies that the committed doc was generated from the current inputs (its header
holds their digest) - cheap enough for ``make test``.

Usage: ``python tools/accuracy/run.py [--limit N] [--csv FILE] [--check]``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

DOC = REPO / "docs" / "speed-accuracy.md"
ACCURACY = REPO / "kg" / "speed" / "accuracy.yaml"  # the held-out table of DOC, read by check's Speed section
SPLIT = HERE / "split.csv"
MODELS = HERE / "models.yaml"
GROUP_KEYS = ("mode", "model_path", "system", "backend", "backend_version", "precision", "gemm_quant_mode",
              "moe_quant_mode", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
              "prefill_tp_size", "prefill_pp_size", "prefill_attention_dp_size", "prefill_moe_tp_size",
              "prefill_moe_ep_size", "prefill_num_workers", "decode_tp_size", "decode_pp_size",
              "decode_attention_dp_size", "decode_moe_tp_size", "decode_moe_ep_size", "decode_num_workers")
BARE_CTX_TOKENS = 8192
MIN_ROWS = 30  # targets apply to engine x GPU cells with at least this many held-out rows
# a leave-one-out fit (``_left_out_error``) is made on at least this many train rows: 4 per coefficient of the largest
# form (a, b, c, d and t0). At 30 (MIN_ROWS, the rule before) a cell whose train rows are two groups of 24 and 27
# (sglang/h100: Qwen3-32B TP 2 and TP 4) could never be checked either way and stayed uncalibrated. A smaller form
# needs fewer (``min_fit_rows``: 4 per coefficient of the form fitted, 12 for the factor alone): at 20 for every form a
# model measured in two groups of 15 (vLLM Llama-3.1-70B on H100, TP 2 and TP 4) could not get its own factor
MIN_FIT_ROWS = 20


def package_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("aiconfigurator-core is not installed: pip install 'optkg[speed]'")
    return Path(list(spec.submodule_search_locations)[0])


def group_of(row: dict) -> str:
    return "|".join(row.get(k) or "" for k in GROUP_KEYS)


def load_split() -> dict[str, str]:
    with SPLIT.open(newline="") as f:
        return {r["group"]: r["split"] for r in csv.DictReader(f)}


# the kg/speed files the serving estimate is made of (the training-speed modules beside them are not inputs)
SERVING_SOURCES = ("estimator.py", "mapping.py", "serving.py", "tables.yaml", "context_isl.yaml", "calibration.yaml")
# what else the serving numbers are made of: the facts `check` derives and kg.speed.serving reads (the KV budget and
# capacity per scheduler, weights per GPU, weight / KV quantisation, the model facts of config.json, the GPU's memory,
# the settings an engine's launch command and flag table give). A change to any of them moves the numbers (as main's
# KV-budget and model-fact commits did before bc1a704 and c7e380e), so `--check` flags the docs; repo-relative globs
FACT_SOURCES = ("kg/derive/__init__.py", "kg/derive/budget.py", "kg/derive/drafts.py", "kg/derive/encoder_cache.py",
                "kg/derive/kv.py", "kg/derive/lora.py", "kg/derive/weights.py", "kg/engines/base.py",
                "kg/engines/budget.py", "kg/engines/dsa_kv.py", "kg/engines/launch.py",
                "kg/engines/{vllm,sglang,trtllm}/__init__.py", "kg/engines/{vllm,sglang,trtllm}/budget.py",
                "kg/engines/{vllm,sglang,trtllm}/launch.py", "kg/engines/trtllm/kv.py", "kg/engines/vllm/kv_*.py",
                "kg/engines/vllm/cudagraph.py",
                "kg/engines/vllm/v0.py", "kg/engines/sglang/capacity.py", "kg/engines/sglang/pools.py",
                "kg/engines/sglang/memfrac.py", "kg/engines/sglang/dcp.py", "kg/analyses/weightfacts.py",
                "kg/analyses/checkpointfacts.py", "kg/analyses/stackfacts.py", "kg/inputs/modelcfg.py",
                "kg/inputs/effective.py",  # the effective settings (running cap, prefill budget) Speed reads
                "catalog/engines/releases/{vllm,sglang,trtllm}.yaml",  # ... and the release defaults they apply
                "kg/knowledge/vocabulary.py", "catalog/engines/{vllm,sglang,trtllm}.yaml",
                "catalog/support/vllm-attention-backends.yaml",  # the backend, and so the KV dtype / block, vLLM picks
                # the GPUs the estimator times (kg/speed/tables.yaml systems)
                "catalog/hardware/{systems}.yaml")


def serving_inputs() -> list[Path]:
    """kg/speed's serving sources and data and every file of ``FACT_SOURCES``, sorted: what a serving number depends on
    inside the repository."""
    import yaml
    gpus = list((yaml.safe_load((REPO / "kg" / "speed" / "tables.yaml").read_text(encoding="utf-8")) or {})["systems"])
    subs = {"{vllm,sglang,trtllm}": ("vllm", "sglang", "trtllm"), "{systems}": gpus}

    def expand(g: str) -> list[str]:
        for k, vals in subs.items():
            if k in g:
                return [x for v in vals for x in expand(g.replace(k, v))]
        return [g]
    facts = sorted({f for g in FACT_SOURCES for e in expand(g) for f in REPO.glob(e) if f.is_file()})
    return [*(REPO / "kg" / "speed" / n for n in SERVING_SOURCES), *facts]


def digest_files(files: list[Path]) -> "hashlib._Hash":
    h = hashlib.sha256()
    for f in files:
        # an installed package's file by its name alone: where the venv sits (inside the checkout, as CI's
        # .venv, or outside it) and its python3.X folder must not change the digest
        inside = f.is_relative_to(REPO) and "site-packages" not in f.parts
        rel = f.relative_to(REPO) if inside else Path(f.name)
        h.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return h


def input_digest() -> str:
    """Digest of everything the doc depends on: the harness, split, model aliases, the serving inputs
    (``serving_inputs``: kg/speed and the facts check derives for it), the measured CSV and the estimator's release."""
    from kg.speed.estimator import estimator_version
    h = digest_files([Path(__file__), HERE / "measured.py", HERE / "launches.yaml", SPLIT, MODELS, *serving_inputs(),
                      package_dir() / "systems" / "silicon_sample.csv"])
    h.update(str(estimator_version()).encode())
    return h.hexdigest()[:16]


def _bundled(cfg_id: str) -> dict[str, bytes]:
    base = package_dir() / "model_configs" / cfg_id.replace("/", "--")
    f = Path(f"{base}_config.json")
    if not f.is_file():
        raise FileNotFoundError(f"no bundled config for {cfg_id}")
    out = {"config.json": f.read_bytes()}
    q = Path(f"{base}_hf_quant_config.json")
    if q.is_file():
        out["hf_quant_config.json"] = q.read_bytes()
    return out


def config_files(model_path: str, models: dict) -> dict[str, bytes]:
    """The bundled config.json (+ hf_quant_config.json) aiconfigurator-core itself reads for ``model_path``."""
    return _bundled((models["aliases"].get(model_path) or {}).get("config", model_path))


def served_files(r: dict, models: dict) -> dict[str, bytes]:
    """The checkpoint the measured run served (models.yaml ``checkpoints`` by the row's gemm quant mode), else the
    model's own config; a ModelOpt FP8 / NVFP4 run of a model without such a bundled checkpoint gets the
    hf_quant_config.json ModelOpt writes (FP8 KV cache included, as in every ModelOpt hf_quant_config.json
    aiconfigurator-core bundles: nvidia--*-NVFP4, Qwen3-32B-FP8-Static)."""
    ckpt = (models["checkpoints"].get(r["model_path"]) or {}).get(r["gemm_quant_mode"])
    files = _bundled(ckpt) if ckpt else config_files(r["model_path"], models)
    algo = None if r["model_path"] in models["native_quant"] else MODELOPT_ALGO.get(r["gemm_quant_mode"])
    if algo and b"quantization_config" not in files["config.json"] and "hf_quant_config.json" not in files:
        files["hf_quant_config.json"] = json.dumps(
            {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": algo, "kv_cache_quant_algo": "FP8"}}
        ).encode()
    return files


def _len(r: dict) -> int:
    """The context length a benchmark of isl + osl tokens launches with (rounded up to 1,024)."""
    return math.ceil((int(r["isl"]) + int(r["osl"])) / 1024) * 1024


# engine -> launch command of the run's layout (optkg reads it as a user's command); the benchmark's own flags
# (measured.Run.flags) follow, and a parallel option they set is not repeated
def _vllm_cmd(d: str, run) -> str:
    cmd = f"vllm serve {d} -tp {run.tp} -pp {run.pp} --max-model-len {_len(run.row)}"
    cmd += f" -dp {run.adp}" if run.adp > 1 else ""
    cmd += " --enable-expert-parallel" if run.moe_ep > 1 and "--enable-expert-parallel" not in run.flags else ""
    return f"{cmd} {run.flags}".strip()


def _sglang_cmd(d: str, run) -> str:
    cmd = (f"python -m sglang.launch_server --model-path {d} --tp {run.tp * run.adp} --pp-size {run.pp} "
           f"--context-length {_len(run.row)}")
    cmd += f" --dp {run.adp} --enable-dp-attention" if run.adp > 1 else ""
    cmd += f" --ep-size {run.moe_ep}" if run.moe_ep > 1 and "--ep-size" not in run.flags else ""
    return f"{cmd} {run.flags}".strip()


def _trtllm_cmd(d: str, run) -> str:
    cmd = f"trtllm-serve {d} --tp_size {run.tp * run.adp} --pp_size {run.pp} --max_seq_len {_len(run.row)}"
    cmd += f" --ep_size {run.moe_ep}" if run.moe_ep > 1 and "--ep_size" not in run.flags else ""
    return f"{cmd} {run.flags}".strip()


def command(d: str, run) -> str:
    """The run's launch command (``COMMANDS``), after the environment variables its script exports."""
    cmd = COMMANDS[run.row["backend"]](d, run)
    return " ".join([*(f"{k}={v}" for k, v in sorted(run.env.items())), cmd])


COMMANDS = {"vllm": _vllm_cmd, "sglang": _sglang_cmd, "trtllm": _trtllm_cmd}
# the row's gemm quant mode -> ModelOpt's quant_algo of the checkpoint such a run serves
MODELOPT_ALGO = {"fp8": "FP8", "nvfp4": "NVFP4"}


# A row InferenceX tags "fp8" that served a block-scaled FP8 checkpoint (deepseek-ai/DeepSeek-R1 / -V3,
# zai-org/GLM-5-FP8, MiniMaxAI/MiniMax-M2.5, Qwen/Qwen3-235B-A22B-FP8: weight_block_size [128, 128]) is timed as
# `check` times that checkpoint (no quant modes passed: kg.speed.serving.block_fp8_modes, kg/speed/tables.yaml
# fp8_block_modes and weight_quant_block), not as per-tensor fp8: SGLang, vLLM and TensorRT-LLM all read the block
# size and run block-scaled kernels (SGLang 0.5.9 layers/quantization/fp8.py:179,247-249,619-638,677-679; vLLM and
# TensorRT-LLM: the evidence in tables.yaml).


def _block_fp8(files: dict[str, bytes]) -> bool:
    """The served checkpoint is block-scaled FP8 (config.json quantization_config: quant_method fp8 with a
    weight_block_size)."""
    qc = json.loads(files["config.json"]).get("quantization_config") or {}
    return qc.get("quant_method") == "fp8" and bool(qc.get("weight_block_size"))


class Scorer:
    def __init__(self):
        import yaml
        import kg
        from kg.core.cache import cache_dir
        self.kg = kg
        self.catalog = kg.load_catalog()
        self.rules = kg.load_rules("check")
        self.models = yaml.safe_load(MODELS.read_text())
        from kg.speed.estimator import tables
        self.hw = {v["system"]: k for k, v in tables()["systems"].items()}
        self.root = cache_dir()
        self.memo: dict[tuple, object] = {}  # check does not depend on concurrency: one per launch command

    def bare(self, run) -> dict:
        """aiconfigurator-core as its authors evaluate it against this CSV (tools/accuracy_regression_testing/
        predict_silicon_sample.py -> cli_estimate, mode agg): the row's layout and ``batch_size``, ``ctx_tokens`` =
        isl, the row's engine release when the database has it (else its default), the row's quant modes, the
        bundled config of the row's model; the layout corrected where the CSV records it wrongly (measured.py)."""
        from kg.speed.estimator import NotEvaluable, Point, model_dir, run_point
        from kg.speed.serving import cached
        r = run.row
        try:
            folder, digest = model_dir(config_files(r["model_path"], self.models), self.root)
        except FileNotFoundError as e:
            return {"not_evaluable": str(e)}
        release = self._bare_release(r)
        if release is None:
            return {"not_evaluable": f"no {r['backend']} database for {r['system']}"}
        p = Point(model=r["model_path"], config_digest=digest, system=r["system"], backend=r["backend"],
                  release=release, tp_size=run.tp, pp_size=run.pp, attention_dp_size=run.adp, moe_tp_size=run.moe_tp,
                  moe_ep_size=run.moe_ep, gemm_quant_mode=r["gemm_quant_mode"] or None,
                  moe_quant_mode=r["moe_quant_mode"] or None, kvcache_quant_mode=None, batch_size=run.batch_per_rank,
                  isl=int(r["isl"]), osl=int(r["osl"]), ctx_tokens=int(r["isl"]))
        try:
            return cached("speed-point", p.key(), lambda: run_point(p, str(folder)))
        except NotEvaluable as e:
            return {"not_evaluable": str(e)}

    def signature(self, r: dict) -> str:
        """kg.speed.serving.model_signature of the checkpoint the row served ("" when it has no bundled config)."""
        from kg.speed.serving import model_signature
        key = ("sig", r["model_path"], r["gemm_quant_mode"])
        if key not in self.memo:
            try:
                self.memo[key] = model_signature(served_files(r, self.models)["config.json"])
            except FileNotFoundError:
                self.memo[key] = ""
        return self.memo[key]

    def is_moe(self, model_path: str) -> bool:
        """The model's bundled config.json names routed experts (num_experts / n_routed_experts /
        num_local_experts, at the top or in text_config)."""
        key = ("moe", model_path)
        if key not in self.memo:
            try:
                cfg = json.loads(config_files(model_path, self.models)["config.json"])
            except FileNotFoundError:
                cfg = {}
            cfgs = [cfg, cfg.get("text_config") or {}]
            self.memo[key] = any(c.get(k) for c in cfgs for k in ("num_experts", "n_routed_experts", "num_local_experts"))
        return self.memo[key]

    def _bare_release(self, r: dict) -> str | None:
        from aiconfigurator_core.sdk import perf_database
        key = (r["system"], r["backend"], r["backend_version"])
        if key not in self.memo:
            cur = (perf_database.get_version_slots(r["system"], r["backend"]) or {}).get("current")
            have = perf_database.get_supported_databases().get(r["system"], {}).get(r["backend"], [])
            self.memo[key] = r["backend_version"] if r["backend_version"] in have else cur
        return self.memo[key]

    def optkg(self, run) -> dict:
        from kg.speed.serving import Workload, speed_for_stack
        from kg.speed.estimator import model_dir
        r = run.row
        if run.not_evaluable:
            return {"status": "not_evaluable", "reasons": [run.not_evaluable]}
        try:
            files = served_files(r, self.models)
        except FileNotFoundError as e:
            return {"status": "not_evaluable", "reasons": [str(e)]}
        folder, _ = model_dir(files, self.root)
        hw = self.hw.get(r["system"])
        if hw is None:
            return {"status": "not_evaluable", "reasons": [f"GPU {r['system']} is not in optkg's hardware catalog"]}
        cmd = command(str(folder), run)
        from kg.speed.estimator import _parse
        version = r["backend_version"] if _parse(r["backend_version"]) else run.release
        memo_key = (cmd, version, hw, run.adp, tuple(sorted(run.settings.items())))
        if memo_key not in self.memo:
            self.memo[memo_key] = self._check(cmd, run, hw, version)
        got = self.memo[memo_key]
        if isinstance(got, str):
            return {"status": "not_evaluable", "reasons": [got]}
        stack, report = got
        quant = None if r["model_path"] in self.models["native_quant"] else \
            {"gemm": r["gemm_quant_mode"] or None, "moe": r["moe_quant_mode"] or None}
        if quant and quant["gemm"] == "fp8" and _block_fp8(files):
            quant = None  # the checkpoint's block-scaled FP8, as check reads it (kg.speed.serving.block_fp8_modes)
        out = speed_for_stack(stack, report, Workload(run.isl, run.osl, run.concurrency), quant)
        # the release kg.speed.serving keys the calibration by (the check's engine_version): the fit records the same
        out["engine_release"] = (report.get("stack") or {}).get("engine_version") or stack.engine_version or ""
        return out

    def _check(self, cmd: str, run, hw: str, version: str | None):
        """(stack, check report dict) of the run's launch command, or the reason it cannot be read."""
        from kg.core.errors import OptkgError
        from kg.inputs.stack import set_setting
        r = run.row
        try:
            stack = None
            for v in (version, None):
                try:
                    stack = self.kg.stack_from_command(cmd, self.catalog, engine_version=v)
                    break
                except OptkgError:
                    if v is None:
                        raise
            stack.hardware = self.catalog.resolve_hardware(hw)
            stack.gpu_count = run.gpus
            if r["backend"] == "trtllm" and run.adp > 1:
                stack.settings["enable_dp_attention"] = True
            settings = dict(run.settings)
            if r["backend"] == "trtllm" and MODELOPT_ALGO.get(r["gemm_quant_mode"]) and "kv_cache_dtype" not in settings:
                # TensorRT-LLM takes the KV-cache quantisation of a ModelOpt checkpoint (kv_cache_quant_algo FP8 in
                # its hf_quant_config.json) as its KV dtype; optkg's TensorRT-LLM reader does not read it yet
                settings["kv_cache_dtype"] = "fp8"
            for k, v in settings.items():
                set_setting(stack, k, v, "InferenceX launch script (tools/accuracy/launches.yaml)", self.catalog)
            return stack, self.kg.check(stack, self.catalog, self.rules).to_dict()
        except OptkgError as e:
            return f"optkg could not read the stack: {e}"


def ape(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas * 100.0


def mape(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def score(rows: list[dict], limit: int | None, progress: bool, only: str | None = None,
          sc: "Scorer | None" = None) -> list[dict]:
    import re
    from measured import measurement_of, run_of, speculative_twins
    split = load_split()
    sc = sc or Scorer()
    out = []
    todo = rows[:limit] if limit else rows
    if only:
        todo = [r for r in todo if re.search(only, "|".join((r["id"], r["model_path"], r["backend"], r["system"])))]
    twins = speculative_twins(rows, sc.is_moe)  # runs a speculative sweep measured, whichever dump repeats them
    t0 = time.time()
    for i, r in enumerate(todo):
        rec = {k: r[k] for k in ("id", "mode", "backend", "backend_version", "system", "model_path", "isl", "osl",
                                 "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_ep_size",
                                 "gemm_quant_mode")}
        rec["group"] = group_of(r)
        rec["split"] = split.get(rec["group"], "unsplit")
        rec["ttft_ms"], rec["tpot_ms"] = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])
        rec["measurement"] = f"{r['system']}|{r['isl']}|{r['osl']}|{rec['ttft_ms']:.4f}|{rec['tpot_ms']:.4f}"
        if r["mode"] != "agg":
            rec["optkg_status"] = "not_evaluable"
            rec["optkg_reason"] = "disaggregated serving (separate prefill and decode workers) is not a stack optkg checks"
            out.append(rec)
            continue
        run = run_of(r, sc.is_moe(r["model_path"]))
        if not run.not_evaluable and measurement_of(r) in twins:
            run.speculative = run.not_evaluable = twins[measurement_of(r)]
        rec["source"] = run.source
        rec["layout"] = f"tp{run.tp} pp{run.pp} dp{run.adp} moe_tp{run.moe_tp} moe_ep{run.moe_ep}"
        rec["corrected"] = "; ".join(run.corrections)
        rec["launch"] = run.launch_evidence or ""
        rec["outside_sweep"] = run.outside_sweep or ""
        rec["disagg_as_agg"] = bool(run.not_evaluable) and not run.speculative
        rec["speculative"] = bool(run.speculative)
        # the workload optkg's calibration sees
        rec["concurrency"], rec["mean_isl"], rec["mean_osl"] = run.concurrency, run.isl, run.osl
        b = sc.bare(run)
        if "not_evaluable" in b:
            rec["bare_reason"] = b["not_evaluable"]
        else:
            rec["bare_ttft_ms"], rec["bare_tpot_ms"] = b["ttft_ms"], b["tpot_ms"]
        o = sc.optkg(run)
        rec["model_sig"] = sc.signature(r)
        rec["optkg_status"] = o["status"]
        if o["status"] == "ok":
            rec["optkg_ttft_ms"], rec["optkg_tpot_ms"] = o["ttft_ms"], o["itl_ms"]
            rec["optkg_queued"] = o["queued"]
            rec["optkg_running"] = o["running"]
            rec["optkg_kv_tokens"] = o["cap"].get("kv_tokens_per_scheduler")
            rec["optkg_cap_limit"] = o["cap"].get("limit")
            rec["raw_ttft_ms"], rec["raw_tpot_ms"] = o["uncalibrated"]["ttft_ms"], o["uncalibrated"]["itl_ms"]
            rec["optkg_hold_steps"] = o.get("context_hold_steps") or 0.0
            rec["optkg_gemm_mode"] = o["estimator"].get("gemm_quant_mode") or ""
            rec["optkg_moe_ep"] = o["parallel"]["moe_ep_size"]
            rec["optkg_release"] = o["estimator"]["database_release"]
            rec["engine_release"] = o.get("engine_release") or ""
        else:
            rec["optkg_reason"] = "; ".join(o["reasons"])[:300]
        out.append(rec)
        if progress and (i + 1) % 100 == 0:
            print(f"  {i + 1:,}/{len(todo):,} rows ({time.time() - t0:,.0f} s)", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------
# calibration (fitted on the train split only) and the report

CALIBRATION = REPO / "kg" / "speed" / "calibration.yaml"


def _fit_release(r: dict) -> str:
    """The engine release a train row's factor is recorded under (calibration.yaml ``releases``): the release its
    launch was checked at (``engine_release``: the CSV's, else the image of its launch script, launches.yaml, or the
    final release before a nightly image), which kg.speed.serving compares with the stack's; "unrecorded" where
    none is known. Keyed by the CSV's ``backend_version`` alone, the InferenceX rows of no recorded release (vLLM
    Llama-3.1-70B on the v0.10.2 image) were fitted as "unrecorded" and then refused their own factor as 0.10.2."""
    return r.get("engine_release") or r.get("backend_version") or "unrecorded"


def _osl(r: tuple) -> int:
    """The output length of a fit row (field 7; rows without one are read at 1,024 tokens)."""
    return r[7] if len(r) > 7 else 1024


def _design(rows: list[tuple], osl: bool = False) -> tuple:
    """The regressors of a fit: 1, log2(concurrency), log2(isl) and, with ``osl``, log2(osl)."""
    import numpy as np
    return (np.array([[1.0, math.log2(r[0]), math.log2(r[1])] + ([math.log2(_osl(r))] if osl else []) for r in rows]),
            np.array([r[2] for r in rows]))


def _lsq_at(rows: list[tuple], t0: float, osl: bool = False) -> tuple[list[float], float] | None:
    """``[a, b, c]`` of measured = t0 + estimated x exp(a + b log2(concurrency) + c log2(isl)) over ``rows`` of
    (concurrency, isl, measured / estimated, model, GPU, group, estimated), and its MAPE on them: least squares of
    log((measured - t0) / estimated) on the rows where measured - t0 stays above 1/20 of the estimate, then ``a`` moved
    to the value that minimises the MAPE on every row (the log fit centres the median ratio; MAPE, the error
    reported, is not symmetric in log space). With t0 = 0 the plain multiplicative factor."""
    import numpy as np
    x, q = _design(rows, osl)
    est = np.array([r[6] for r in rows])
    rest = q - t0 / est  # (measured - t0) / estimated
    ok = rest > 1 / 20
    if ok.sum() < x.shape[1]:
        return None
    coef = np.linalg.lstsq(x[ok], np.log(rest[ok]), rcond=None)[0]
    base = x @ coef
    # |t0 + f est - m| / m = |(t0 / est + f) / q - 1|: a sum of terms convex in exp(d), so one minimum over the
    # shifts d of the 301-point lattice on [-1.5, 1.5]: every 10th point first, then the lattice around the best
    shifts = np.linspace(-1.5, 1.5, 301)
    mape_at = lambda i: np.mean(np.abs((t0 / est + np.exp(base[None, :] + shifts[i, None])) / q - 1.0), axis=1)  # noqa: E731
    coarse = np.arange(0, 301, 10)
    c = int(coarse[int(np.argmin(mape_at(coarse)))])
    fine = np.arange(max(0, c - 10), min(301, c + 11))
    errs = mape_at(fine)
    i = int(fine[int(np.argmin(errs))])
    coef[0] += shifts[i]
    return [float(v) for v in coef], float(np.min(errs))


def _lsq(rows: list[tuple], overhead: bool = False, osl: bool = False) -> list[float] | None:
    """The multiplicative factor ``[a, b, c]`` (``_lsq_at`` with t0 = 0) or, with ``overhead``, ``[a, b, c, t0]``: the
    estimate times the factor plus a fixed time t0 >= 0 (ms), a cost per request (TTFT) or per engine step (TPOT)
    outside the per-op kernel timings the estimator sums (the serving front end, the scheduler's CPU work;
    aiconfigurator-core adds such a constant itself for vLLM's prefill, sdk/backends/vllm_backend.py
    ``_prefill_dispatch_overhead_ms``). t0 is taken from a grid over [0, 0.9 x the rows' 10th-percentile measured
    value], each point with its own least squares; the lowest MAPE wins. None when even so the rows' MAPE is not
    lowered (factor 1, no overhead).

    With ``osl`` the factor has a fourth term, d log2(osl), stored after t0: ``[a, b, c, t0, d]`` (t0 = 0 without
    ``overhead``). The estimator's TPOT is a mean over a request's engine steps, the steps that also prefill other
    requests' prompts among them, and their share depends on how many decode steps (OSL) a prompt is spread over
    (BaseBackend.run_agg: steps_to_finish_ctx against decode_iterations); in a closed loop a request's TTFT queues
    behind the prompts of clients that return after ISL + OSL tokens."""
    import numpy as np
    _, q = _design(rows)
    meas = q * np.array([r[6] for r in rows])
    grid = np.linspace(0.0, 0.9 * float(np.percentile(meas, 10)), 16) if overhead else [0.0]
    fits = [(f, t0) for t0 in grid for f in [_lsq_at(rows, float(t0), osl)] if f]
    if not fits:
        return None
    (coef, err), t0 = min(fits, key=lambda ft: ft[0][1])
    if err >= float(np.mean(np.abs(1.0 / q - 1.0))):
        return None
    if osl:
        return [round(v, 5) for v in coef[:3]] + [round(float(t0), 3), round(coef[3], 5)]
    return [round(v, 5) for v in coef] + ([round(float(t0), 3)] if overhead else [])


def _ranges(rows: list[tuple]) -> tuple[list[int], list[int], list[int]]:
    """The [min, max] of the rows' concurrency, ISL and OSL."""
    return ([min(r[0] for r in rows), max(r[0] for r in rows)], [min(r[1] for r in rows), max(r[1] for r in rows)],
            [min(_osl(r) for r in rows), max(_osl(r) for r in rows)])


def _ratio(coef: list[float] | None, span: dict, r: tuple) -> float:
    """calibrated estimate / measured for row ``r`` (``coef`` clamped to ``span``'s ranges, as kg.speed.serving
    applies it)."""
    from kg.speed.serving import Workload, calibration_factor, calibration_overhead_ms, within_fit
    f = calibration_factor(coef, within_fit(span, Workload(r[1], _osl(r), r[0])))
    return (f + calibration_overhead_ms(coef) / r[6]) / r[2]


def min_fit_rows(overhead: bool, osl: bool) -> int:
    """The fewest train rows a leave-one-out fit of a form is made on: 4 per coefficient of that form (a, b, c; + t0;
    + d), MIN_FIT_ROWS for the largest."""
    return 4 * (3 + overhead + osl)


def _left_out_error(rows: list[tuple], part: int, overhead: bool = False,
                    osl: bool = False) -> tuple[float, float] | None:
    """Leave-one-out over the values of field ``part`` of ``rows`` (3: the model, 4: the GPU, 5: the configuration
    group of tools/accuracy/split.csv): fitted without one value's rows (when >= ``min_fit_rows`` remain) and applied to
    them (clamped to the fit's ranges, as kg.speed.serving does): (MAPE with the factor, MAPE without), pooled over
    every left-out value; TRAIN rows only. None when no value can be left out with >= ``min_fit_rows`` to fit on (one
    value only): no evidence either way."""
    import numpy as np
    cal, raw = [], []
    values = sorted({r[part] for r in rows})
    least = min_fit_rows(overhead, osl)
    if not any(sum(1 for r in rows if r[part] != v) >= least for v in values):
        return None
    for left in values:
        fit_on = [r for r in rows if r[part] != left]
        coef = _lsq(fit_on, overhead, osl) if len(fit_on) >= least else None
        span = dict(zip(("concurrency", "isl", "osl"), _ranges(fit_on))) if fit_on else {}
        for r in rows:
            if r[part] == left:
                cal.append(abs(_ratio(coef, span, r) - 1.0))
                raw.append(abs(1.0 / r[2] - 1.0))
    return (float(np.mean(cal)), float(np.mean(raw))) if cal else None


def _transfers(rows: list[tuple], part: int, overhead: bool = False, osl: bool = False) -> bool | None:
    """Does the factor lower the error of the left-out values (``_left_out_error``)? None: no evidence."""
    e = _left_out_error(rows, part, overhead, osl)
    return None if e is None else e[0] < e[1]


def _lowers(coef: list[float] | None, span: dict, rows: list[tuple]) -> bool:
    """Does the factor ``coef`` (clamped to ``span``'s ranges) lower the MAPE of ``rows``?"""
    if not coef:
        return False
    return statistics.fmean(abs(_ratio(coef, span, r) - 1.0) for r in rows) < \
        statistics.fmean(abs(1.0 / r[2] - 1.0) for r in rows)


# the calibration's forms, simplest first (a later one is kept only when its left-out error is strictly lower):
# evidence key -> (overhead: a fixed time t0, osl: a log2(osl) term in the factor)
FORMS = {"factor": (False, False), "factor_plus_fixed": (True, False), "factor_osl": (False, True),
         "factor_plus_fixed_osl": (True, True)}


def _form(rows: list[tuple]) -> tuple[bool | None, bool, dict, bool]:
    """(kept, overhead, evidence, osl) for one cell and metric, from leave-one-configuration-group-out on the train
    rows: the form (``FORMS``: the factor of concurrency and ISL, alone or plus a fixed time, each with or without an
    OSL term, ``_lsq``) with the lowest left-out error, kept only where that error is below the uncalibrated one; kept
    None when the rows hold one group (no evidence). ``evidence``: the left-out MAPEs in percent (``uncalibrated`` and
    one per form), written to calibration.yaml."""
    errs = {name: _left_out_error(rows, 5, *flags) for name, flags in FORMS.items()}
    if errs["factor"] is None:
        return None, False, {}, False
    best = "factor"
    for name, e in errs.items():
        if e is not None and e[0] < errs[best][0] - 1e-6:  # lower, not equal up to rounding
            best = name
    evidence = {"uncalibrated": round(errs["factor"][1] * 100, 1),
                **{name: round(e[0] * 100, 1) if e else None for name, e in errs.items()}}
    overhead, osl = FORMS[best]
    return errs[best][0] < errs[best][1], overhead, evidence, osl


def _cell_left_out_on(rows: list[tuple], sig: str, overhead: bool, osl: bool, kept: bool) -> float:
    """The cell factor's leave-one-configuration-group-out error on the rows of model ``sig`` (a per-model key, field 8): for each of its groups,
    the factor fitted on every other row of the cell (the cell's form) applied to that group's rows; the uncalibrated
    error when the cell keeps no factor."""
    own = [r for r in rows if r[8] == sig]
    if not kept:
        return statistics.fmean(abs(1.0 / r[2] - 1.0) for r in own)
    errs = []
    for g in sorted({r[5] for r in own}):
        fit_on = [r for r in rows if r[5] != g]
        coef = _lsq(fit_on, overhead, osl) if len(fit_on) >= min_fit_rows(overhead, osl) else None
        span = dict(zip(("concurrency", "isl", "osl"), _ranges(fit_on)))
        errs += [abs(_ratio(coef, span, r) - 1.0) for r in own if r[5] == g]
    return statistics.fmean(errs)


def _engine_for(cell: dict[str, list], engine_rows: dict[str, list], form: dict, engine_form: dict,
                names: dict[str, str]) -> dict:
    """``{metric: {signature: {"model": name, "left_out_mape": {"engine": %, "uncalibrated": %}}}}``: the models of a
    cell whose own factor was refused (leave-one-group-out no better than uncalibrated, ``_form``) that take the
    engine-wide ``<engine>/*`` factor, because on their own train rows in the cell, each configuration group left out
    of the engine-wide fit (the engine's form) and predicted by it, the error is below the uncalibrated one. A cell
    can refuse one factor for rows of two harnesses (vllm/h200: NVIDIA's gap-analysis rows beside InferenceX's) while
    the engine-wide factor, fitted mostly on InferenceX rows of the other GPUs, carries to that cell's InferenceX
    models; the models it does not carry to stay uncalibrated (or take their own factor, ``per_model``)."""
    out: dict[str, dict] = {}
    for m in ("ttft", "tpot"):
        if form[m][0] is not False or not engine_form[m][0]:
            continue
        _, overhead, _, osl = engine_form[m]
        for sig in sorted({r[3] for r in cell[m]}):
            own = [r for r in cell[m] if r[3] == sig]
            errs = []
            for g in sorted({r[5] for r in own}):
                fit_on = [r for r in engine_rows[m] if r[5] != g]
                coef = _lsq(fit_on, overhead, osl)
                span = dict(zip(("concurrency", "isl", "osl"), _ranges(fit_on)))
                errs += [abs(_ratio(coef, span, r) - 1.0) for r in own if r[5] == g]
            raw = statistics.fmean(abs(1.0 / r[2] - 1.0) for r in own)
            if statistics.fmean(errs) < raw:
                out.setdefault(m, {})[sig] = {"model": names[sig], "left_out_mape": {
                    "engine": round(statistics.fmean(errs) * 100, 1), "uncalibrated": round(raw * 100, 1)}}
    return out


def _per_model(cell: dict[str, list], form: dict, names: dict[str, str]) -> dict:
    """Factors of the models whose own train rows support one, keyed by kg.speed.serving.per_model_key (the model's
    shapes and the GEMM mode the estimator timed: its error is per kernel): a model with two or more configuration
    groups of the cell that can each be left out with >= ``min_fit_rows`` of its rows still to fit on gets its own factor (the form with the lowest leave-one-group-out error on its rows, ``_form``)
    where that error is below both the uncalibrated one and the cell factor's on the same rows, left out the same way
    (``_cell_left_out_on``). The estimator's error differs by model (its per-op tables fit some kernels better than
    others), and one factor per cell fitted to several models moves each the same way."""
    out: dict[str, dict] = {}
    for m in ("ttft", "tpot"):
        rows = cell[m]
        for sig in sorted({r[8] for r in rows}):
            own = [r for r in rows if r[8] == sig]
            groups = {r[5] for r in own}
            # evidence from at least two left-out groups, each predicted by a fit on >= min_fit_rows of the model's
            # other rows (a group too large to leave out is only ever "predicted" uncalibrated)
            if sum(1 for g in groups if sum(1 for r in own if r[5] != g) >= min_fit_rows(False, False)) < 2:
                continue
            kept, overhead, _, osl = _form(own)
            if not kept:
                continue
            e_own = _left_out_error(own, 5, overhead, osl)[0]
            e_cell = _cell_left_out_on(rows, sig, form[m][1], form[m][3], bool(form[m][0]))
            if e_own >= e_cell - 1e-6:
                continue
            entry = out.setdefault(sig, {"model": names[sig]})
            entry[m] = _lsq(own, overhead, osl)
            entry.setdefault("left_out_mape", {})[m] = {"own": round(e_own * 100, 1), "cell": round(e_cell * 100, 1)}
    for sig, entry in out.items():
        own = [r for m in ("ttft", "tpot") if entry.get(m) for r in cell[m] if r[8] == sig]
        entry["train_rows"] = len({(r[5], r[0], r[1], r[7]) for r in own})
        entry["concurrency"], entry["isl"], entry["osl"] = _ranges(own)
    return out


def _mean_osl(r: dict) -> int:
    """The mean output length the row's client drew (measured.mean_length; the record's own when it has one)."""
    from measured import mean_length
    return int(r.get("mean_osl") or max(2, mean_length(int(r["osl"]), r.get("source") or "")))


def fit_pair(r: dict, m: str) -> tuple[float, float] | None:
    """(measured, uncalibrated estimate) of ``m`` (``ttft`` / ``tpot``) a factor is fitted to for a scored row, or None
    where the row's TTFT is left out of the fit. Where a scheduler held the prompt back (kg.speed.mapping
    context_hold), kg.speed.serving adds the held decode steps after the factor, so the TTFT factor is fitted to the
    rest: where the hold is exact by the engine's source (EngineMapping.context_hold_exact: SGLang's poll period), the
    measured TTFT less the held steps at the measured TPOT, against the estimate less them at the estimated TPOT; a
    modelled wait (TensorRT-LLM's) leaves the row's TTFT out. Left out too, the SGLang B200 cell, whose InferenceX
    scripts all set --scheduler-recv-interval, was fitted on the few runs that do not."""
    from kg.speed.mapping import ENGINES
    measured, estimated = float(r[f"{m}_ms"]), float(r[f"raw_{m}_ms"])
    hold = float(r.get("optkg_hold_steps") or 0.0) if m == "ttft" else 0.0
    if not hold:
        return measured, estimated
    mapping = ENGINES.get(r["backend"])
    if mapping is None or not mapping.context_hold_exact:
        return None
    return measured - hold * float(r["tpot_ms"]), estimated - hold * float(r["raw_tpot_ms"])


def fit(recs: list[dict]) -> dict:
    """Per engine x GPU cell with >= MIN_ROWS train rows, and per engine over all its GPUs (``<engine>/*``, the
    fallback), the least-squares fit of log(measured / optkg-uncalibrated) on log2(concurrency) and log2(isl), for
    TTFT and TPOT, alone or with a fixed time added (``_lsq``); TRAIN rows only. Ratios beyond 20x either way, and rows
    where optkg queues requests, are left out. Form and keep are decided by leave-one-configuration-group-out on the
    train rows (the held-out split's unit: a factor that only fits the train rows would not carry over, ``_form``); a
    cell whose train rows hold one configuration group cannot show it either way and takes the engine-wide factor
    where that lowers the cell's own train error (``fallback``), else none. With each fit its coverage: the measured
    concurrency / ISL ranges, the models it saw (``models``: kg.speed.serving.model_signature -> name) and whether it
    carries over to a model it was not fitted on (``transfers``, leave-one-model-out), its engine releases
    (``releases``) and whether it carries over to another release (``transfers_release``, leave-one-release-out) and,
    for ``<engine>/*``, to a
    GPU (``transfers_gpu``, leave-one-GPU-out)."""
    from kg.speed.serving import per_model_key
    cells: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    names: dict[str, dict[str, str]] = defaultdict(dict)
    for r in recs:
        if r["split"] != "train" or "raw_ttft_ms" not in r or r.get("optkg_queued"):
            continue
        for key in (f"{r['backend']}/{r['system']}", f"{r['backend']}/*"):
            names[key].setdefault(r["model_sig"], r["model_path"])
            for m in ("ttft", "tpot"):
                pair = fit_pair(r, m)
                if pair is None:
                    continue
                measured, estimated = pair
                q = measured / estimated
                if 1 / 20 < q < 20:
                    # the concurrency and ISL kg.speed.serving evaluates the factor at (its Workload), not the CSV's
                    # per-rank batch_size and nominal ISL
                    cells[key][m].append((int(r["concurrency"]), int(r["mean_isl"]), q, r["model_sig"], r["system"],
                                          r["group"], estimated, _mean_osl(r),
                                          per_model_key(r["model_sig"], r.get("optkg_gemm_mode") or None,
                                                        int(float(r.get("optkg_moe_ep") or 1)) > 1),
                                          _fit_release(r)))
    out = {}
    engine_forms: dict[str, dict] = {}  # "<engine>/*" -> its form per metric ("<engine>/*" sorts before its GPUs)
    for k in sorted(cells):
        for key in {r[8] for m in ("ttft", "tpot") for r in cells[k][m]}:
            sig, gemm, *ep = key.split("/")
            names[k].setdefault(key, f"{names[k][sig]} ({gemm} GEMMs{', expert-parallel' if ep else ''})")
        n = min(len(cells[k]["ttft"]), len(cells[k]["tpot"]))
        if n < MIN_ROWS:
            continue
        conc, isl, osl = _ranges(cells[k]["ttft"] + cells[k]["tpot"])
        # a factor that does not lower the error of a configuration group it was not fitted on (leave-one-group-out,
        # the held-out split's own unit) is dropped: it would fit the train rows, not the estimator's error
        # a cell whose rows hold one configuration cannot show it either way: it takes the engine-wide factor
        form = {m: _form(cells[k][m]) for m in ("ttft", "tpot")}
        if k.endswith("/*"):
            engine_forms[k] = form
        coefs = {m: _lsq(cells[k][m], form[m][1], form[m][3]) if form[m][0] else None for m in ("ttft", "tpot")}
        out[k] = {"ttft": coefs["ttft"], "tpot": coefs["tpot"], "train_rows": n,
                  # the measured runs' ranges: kg.speed.serving does not extrapolate the factor beyond them
                  "concurrency": conc, "isl": isl, "osl": osl,
                  "models": dict(sorted(names[k].items(), key=lambda kv: kv[1])),
                  "transfers": {m: _transfers(cells[k][m], 3, form[m][1], form[m][3]) for m in ("ttft", "tpot")},
                  # the engine releases of the rows (the CSV's backend_version; "unrecorded" where it has none) and
                  # whether the factor carries to a release it was not fitted on (leave-one-release-out, train rows):
                  # kg.speed.serving applies it to another release only where it did (newuser6 #3)
                  "releases": dict(sorted(Counter(r[9] for r in cells[k]["tpot"]).items())),
                  "transfers_release": {m: _transfers(cells[k][m], 9, form[m][1], form[m][3])
                                        for m in ("ttft", "tpot")},
                  # the decision's evidence: leave-one-configuration-group-out MAPE (percent) on the train rows
                  "left_out_mape": {m: form[m][2] or None for m in ("ttft", "tpot")}}
        # a model the fit saw whose own train rows the factor makes worse is left uncalibrated (kg.speed.serving
        # calibrated): a cell's rows can hold measurements of another harness (vllm/h200: NVIDIA's gap-analysis rows
        # of vLLM 0.12.0, 0.4-0.6x the estimate, beside InferenceX rows at 1.0-1.5x), and a factor fitted to both
        # must not move the models it fits worse
        span = {"concurrency": conc, "isl": isl, "osl": osl}
        worse = {m: {sig: names[k][sig] for sig in sorted({r[3] for r in cells[k][m]})
                     if not _lowers(coefs[m], span, [r for r in cells[k][m] if r[3] == sig])}
                 for m in ("ttft", "tpot") if coefs[m]}
        if any(worse.values()):
            out[k]["worse_for"] = {m: dict(sorted(v.items(), key=lambda kv: kv[1])) for m, v in worse.items() if v}
        if not k.endswith("/*"):
            own = _per_model(cells[k], form, names[k])
            if own:
                out[k]["per_model"] = own
        engine = out.get(k.split("/")[0] + "/*") or {}  # "<engine>/*" sorts before the engine's GPUs
        fallback = {m: form[m][0] is None and _lowers(engine.get(m), engine, cells[k][m]) for m in ("ttft", "tpot")}
        if not k.endswith("/*") and engine:
            carried = _engine_for(cells[k], cells[k.split("/")[0] + "/*"], form, engine_forms[k.split("/")[0] + "/*"],
                                  names[k])
            if carried:
                out[k]["engine_for"] = carried
        if not k.endswith("/*") and any(fallback.values()):
            out[k]["fallback"] = fallback
        if k.endswith("/*"):
            out[k]["systems"] = sorted({row[4] for row in cells[k]["ttft"]})
            out[k]["transfers_gpu"] = {m: _transfers(cells[k][m], 4, form[m][1], form[m][3]) for m in ("ttft", "tpot")}
    return out


def write_calibration(cells: dict) -> None:
    import yaml
    from kg.speed.estimator import ADAPTER_VERSION, estimator_version
    head = ("# Per engine x GPU calibration of kg.speed.serving: measured / estimated TTFT and TPOT as a function of\n"
            "# concurrency and ISL, fitted on the TRAIN split of aiconfigurator-core's silicon_sample.csv\n"
            "# (tools/accuracy/split.csv; held-out rows are never used). Written by\n"
            "# `python tools/accuracy/run.py --fit`; data, not code: refit when the estimator or the adapter changes.\n")
    doc = {"fitted_on": {"data": f"aiconfigurator-core {estimator_version()} systems/silicon_sample.csv, agg rows",
                         "split": "train",
                         "model": "measured = estimated x exp(a + b log2(concurrency) + c log2(isl) [+ d log2(osl)]) "
                                  "[+ t0]; [a, b, c], [a, b, c, t0] or [a, b, c, t0, d] (t0: a fixed time in ms per "
                                  "request for TTFT, per engine step for TPOT, 0 when absent) by least squares on the "
                                  "train rows of the cell (<engine>/*: all GPUs)",
                         "held": "TTFT of rows where a scheduler holds prompts back (kg.speed.mapping "
                                 "context_hold: its decode steps are added after the factor): fitted less the held "
                                 "steps at the measured TPOT where the hold is exact by the engine's source (SGLang "
                                 "--scheduler-recv-interval), else left out (TensorRT-LLM's modelled waits)",
                         "kept": "the form (with or without t0, with or without the OSL term) with the lowest "
                                 "leave-one-configuration-group-out error on the train rows (a leave-one-out fit on at "
                                 "least 4 rows per coefficient of the form, 12-20), and only where that error is below the uncalibrated one (else "
                                 "null); a cell with one configuration group takes <engine>/* where that lowers the "
                                 "cell's train error (fallback)",
                         "coverage": "applied within the cell's concurrency / ISL / OSL ranges (clamped at their edges), to "
                                     "the models it saw (models: shape signature -> name) except those whose own train "
                                     "error it raised (worse_for), and to other models only "
                                     "where leave-one-model-out on the train split lowered the error (transfers); "
                                     "<engine>/* to another GPU only where leave-one-GPU-out did (transfers_gpu); a "
                                     "model's own factor (per_model) where its own train rows (>= 2 groups, each left out "
                                     "with >= 12 rows to fit on) "
                                     "showed a lower leave-one-group-out error with it than with the cell's; either "
                                     "to an engine release the cell's rows do not hold (releases: rows per release) "
                                     "only where leave-one-release-out did (transfers_release)",
                         "adapter": ADAPTER_VERSION, "tool": "tools/accuracy/run.py --fit"},
           "cells": cells}
    CALIBRATION.write_text(head + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _cell_stats(recs: list[dict]) -> dict:
    """MAPE of optkg (calibrated and not) over every row with an optkg number, and of optkg and the bare estimator
    over the rows where both have one (``*_same``: the like-for-like comparison)."""
    both = [r for r in recs if "bare_ttft_ms" in r]
    err = lambda rs, k, m: mape([ape(r[f"{k}_{m}_ms"], r[f"{m}_ms"]) for r in rs])  # noqa: E731
    return {"n": len(recs), "optkg_ttft": err(recs, "optkg", "ttft"), "optkg_tpot": err(recs, "optkg", "tpot"),
            "raw_ttft": err(recs, "raw", "ttft"), "raw_tpot": err(recs, "raw", "tpot"), "n_bare": len(both),
            "bare_ttft": err(both, "bare", "ttft"), "bare_tpot": err(both, "bare", "tpot"),
            "optkg_ttft_same": err(both, "optkg", "ttft"), "optkg_tpot_same": err(both, "optkg", "tpot")}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def _table(rs: list[dict], heldout: bool) -> list[str]:
    head = ("| engine | GPU | rows | TTFT optkg | TTFT uncal. | TPOT optkg | TPOT uncal. | bare's rows | TTFT optkg | "
            "TTFT bare | TPOT optkg | TPOT bare |" + (" targets (TTFT <= 25 %, TPOT <= 15 %) |" if heldout else ""))
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---|" if heldout else "")]
    cells: dict[tuple, list] = defaultdict(list)
    for r in rs:
        cells[(r["backend"], r["system"])].append(r)
    for (be, sysname), xs in sorted(cells.items()) + ([(("all", "all"), rs)] if rs else []):
        s = _cell_stats(xs)
        row = (f"| {be} | {sysname} | {s['n']} | {_pct(s['optkg_ttft'])} | {_pct(s['raw_ttft'])} | "
               f"{_pct(s['optkg_tpot'])} | {_pct(s['raw_tpot'])} | {s['n_bare']} | {_pct(s['optkg_ttft_same'])} | "
               f"{_pct(s['bare_ttft'])} | {_pct(s['optkg_tpot_same'])} | {_pct(s['bare_tpot'])} |")
        if heldout:
            if be == "all":
                row += " |"
            else:
                met = (s["optkg_ttft"] <= 25 and s["optkg_tpot"] <= 15) if s["n"] >= MIN_ROWS else None
                row += f" {'-' if met is None else ('met' if met else '**not met**')} |"
        out.append(row)
    return out


def render(recs: list[dict], digest: str) -> str:
    from kg.speed.estimator import estimator_version
    agg = [r for r in recs if r["mode"] == "agg"]
    ok = [r for r in agg if r.get("optkg_status") == "ok"]
    lines = [f"<!-- generated by `make accuracy` (tools/accuracy/run.py); inputs digest {digest}; do not edit -->",
             "# Serving speed: accuracy against measured rows", "",
             f"Measured: aiconfigurator-core {estimator_version()} `systems/silicon_sample.csv`, {len(recs):,} rows "
             f"({len(agg):,} aggregated, {len(recs) - len(agg):,} disaggregated), each read as the run it was "
             "(tools/accuracy/measured.py: layout, clients per engine, the benchmark's request lengths and, for the "
             "InferenceX rows, the engine flags of its launch scripts, tools/accuracy/launches.yaml). "
             "**optkg** = `check`'s Speed section for that launch (kg.speed.serving: infeasible stacks refused, "
             "running requests capped by optkg's KV capacity and the engine's cap with the rest queued, engine "
             "release mapped to the nearest database release, prompts a scheduler holds back timed in decode steps "
             "(TensorRT-LLM attention_dp_config.enable_balance, kg.speed.mapping.adp_balance_hold_steps, and batch "
             "waiting, batch_wait_hold_steps; SGLang --scheduler-recv-interval k, k / 2 steps), added to TTFT after "
             "the calibration, whose TTFT factor is fitted on the measured TTFT less those steps at the measured "
             "TPOT where the hold is SGLang's fixed poll period, and on the rows without a hold otherwise), "
             "for TensorRT-LLM the estimator's TTFT queueing factor without its cap at 4 prefill times "
             "(kg.speed.mapping.ttft_queue_factors), "
             "per engine x GPU calibration fitted on the train "
             "split, kg/speed/calibration.yaml: a factor of concurrency and ISL (and OSL where that helped), alone or plus a fixed time per "
             "request (TTFT) or engine step (TPOT) that per-op kernel timings do not hold, whichever form has the "
             "lower leave-one-configuration-group-out error on the train rows, kept only where that error is below "
             "the uncalibrated one, and applied only inside its coverage: concurrency / ISL / OSL ranges, the "
             "models it was fitted on (not those whose own train rows it made worse), other models only where leave-one-model-out on the train rows showed it "
             "carries over; a model whose own train rows in two or more configuration groups showed a lower "
             "leave-one-group-out error with its own factor than with the cell's takes its own; an engine release "
             "the cell's train rows do not hold only where leave-one-release-out did); **uncal.** = the same without the calibration; **bare** = aiconfigurator-core as its "
             "authors compare it with this CSV (`cli_estimate`: the row's layout and batch_size, ctx_tokens = ISL, "
             "the row's release when its database has it), on the rows where it gives a number (**bare's rows**: "
             "their count; optkg's error on the same rows beside bare's). MAPE = mean of |estimate - measured| / "
             "measured. Split: tools/accuracy/split.csv (by configuration group; held-out never fitted on).", ""]
    n_num = len(ok)
    n_reason = sum(1 for r in recs if r.get("optkg_status") in ("infeasible", "not_evaluable"))
    lines += ["## Coverage", "",
              f"- rows with a number: {n_num:,}; with a stated reason (infeasible or not evaluable): {n_reason:,}; "
              f"neither: {len(recs) - n_num - n_reason:,} ({(n_num + n_reason) / len(recs) * 100:.1f} % answered)", ""]
    for split in ("heldout", "train"):
        rs = [r for r in ok if r["split"] == split]
        lines += [f"## {'Held-out' if split == 'heldout' else 'Train'} split", "", *_table(rs, split == "heldout"), ""]
    lines += _against_bare(ok)
    lines += _calibration_forms()
    lines += _limits(ok)
    lines += _kv_binding(ok)
    lines += _duplicates(ok)
    lines += _corrections(recs)
    for status, title in (("infeasible", "Rows optkg calls infeasible"),
                          ("not_evaluable", "Rows optkg cannot evaluate, by reason")):
        rs = [r for r in recs if r.get("optkg_status") == status]
        lines += [f"## {title}", "", f"{len(rs):,} rows.", ""]
        by: dict[str, list] = defaultdict(list)
        for r in rs:
            by[_short(r.get("optkg_reason", ""))].append(r)
        for reason, xs in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            ex = ", ".join(sorted({f"{x['model_path']} {x['backend']} {x['system']}" for x in xs})[:3])
            lines.append(f"- {len(xs)} x {reason} (e.g. {ex})")
        lines.append("")
    return "\n".join(lines)


def _calibration_forms() -> list[str]:
    """The calibration's form per cell and metric with the train-split evidence it was chosen on
    (kg/speed/calibration.yaml ``left_out_mape``)."""
    import yaml
    cells = (yaml.safe_load(CALIBRATION.read_text(encoding="utf-8")) or {}).get("cells") or {}
    out = ["## Calibration per cell and the train evidence for it", "",
           "Leave-one-configuration-group-out MAPE on the train rows (kg/speed/calibration.yaml `left_out_mape`): "
           "uncalibrated, with a factor of concurrency and ISL, with the factor plus a fixed time t0, and both again with "
           "an OSL term in the factor (+ OSL); the form with the lowest error is kept where it is below the "
           "uncalibrated one. Held-out rows play no part.", "",
           "| cell | metric | uncal. | factor | factor + t0 | factor + OSL | factor + t0 + OSL | kept | t0 |",
           "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for cell, v in cells.items():
        for m in ("ttft", "tpot"):
            ev = (v.get("left_out_mape") or {}).get(m) or {}
            coef = v.get(m)
            t0 = coef[3] if coef and len(coef) > 3 else 0.0
            form = "factor" + (" + t0" if t0 else "") + (" + OSL" if coef and len(coef) > 4 else "")
            kept = ("fallback to " + cell.split("/")[0] + "/*" if (v.get("fallback") or {}).get(m) else
                    "no (one configuration group)" if not ev else "no" if not coef else form)
            pct = lambda x: "-" if x is None else f"{x:.1f} %"  # noqa: E731
            out.append(f"| {cell} | {m.upper()} | {pct(ev.get('uncalibrated'))} | {pct(ev.get('factor'))} | "
                       f"{pct(ev.get('factor_plus_fixed'))} | {pct(ev.get('factor_osl'))} | "
                       f"{pct(ev.get('factor_plus_fixed_osl'))} | {kept} | {f'{t0:,.1f} ms' if t0 else '-'} |")
    own = [(cell, e, m) for cell, v in cells.items() for e in (v.get("per_model") or {}).values()
           for m in ("ttft", "tpot") if e.get(m)]
    if own:
        out += ["", "Models with their own factor in a cell (kg/speed/calibration.yaml `per_model`): two or more configuration "
                "groups of train rows, each left out with >= 12 of the model's rows still to fit on, and a leave-one-group-out error on those rows below both the "
                "uncalibrated one and the cell factor's left out the same way.", "",
                "| cell | model | metric | train rows | left-out MAPE, own factor | cell factor |", "|---|---|---|---:|---:|---:|"]
        out += [f"| {cell} | {e['model']} | {m.upper()} | {e['train_rows']:,} | {e['left_out_mape'][m]['own']:.1f} % | "
                f"{e['left_out_mape'][m]['cell']:.1f} % |" for cell, e, m in own]
    carried = [(cell, m, e) for cell, v in cells.items() for m, sigs in (v.get("engine_for") or {}).items()
               for e in sigs.values()]
    if carried:
        out += ["", "Models of a cell that refused its own factor which take the engine-wide one (kg/speed/calibration.yaml "
                "`engine_for`): on the model's train rows of the cell, each configuration group left out of the "
                "engine-wide fit and predicted by it, the error is below the uncalibrated one (a model's own factor, "
                "above, comes first).", "",
                "| cell | model | metric | left-out MAPE, engine-wide factor | uncal. |", "|---|---|---|---:|---:|"]
        out += [f"| {cell} | {e['model']} | {m.upper()} | {e['left_out_mape']['engine']:.1f} % | "
                f"{e['left_out_mape']['uncalibrated']:.1f} % |" for cell, m, e in carried]
    return out + [""]


def _against_bare(ok: list[dict]) -> list[str]:
    """Held-out TPOT of optkg beside the bare estimator's: over different row sets (optkg times rows bare cannot),
    then like for like, and per cell where optkg is worse on the same rows, whether the calibration or the
    uncalibrated composition makes it so."""
    held = [r for r in ok if r["split"] == "heldout"]
    s = _cell_stats(held)
    if not held or not s["n_bare"]:
        return []
    extra: dict[str, int] = defaultdict(int)
    for r in held:
        if "bare_ttft_ms" not in r:
            extra[f"{r['model_path']} ({r['backend']} {r['system']})"] += 1
    others = [r for r in held if "bare_ttft_ms" not in r]
    import yaml
    native = yaml.safe_load(MODELS.read_text())["native_quant"]
    out = ["## Held-out TPOT beside the bare estimator", "",
           f"- all rows with a number: optkg {_pct(s['optkg_tpot'])} over {s['n']} rows, bare {_pct(s['bare_tpot'])} "
           f"over the {s['n_bare']} it times; on those same {s['n_bare']} rows optkg {_pct(s['optkg_tpot_same'])} "
           f"(uncal. {_pct(_cell_stats([r for r in held if 'bare_ttft_ms' in r])['raw_tpot'])}).",
           f"- the {len(others)} rows only optkg times ({_pct(_cell_stats(others)['optkg_tpot'])} TPOT): "
           + ", ".join(f"{k} {v}" for k, v in sorted(extra.items(), key=lambda kv: -kv[1])) + "; bare: "
           + "; ".join(sorted({_short(r.get("bare_reason", "")).split(" at <path>")[0][:110] for r in others})[:3])
           + "".join(f" ({m}: the row's quant label is InferenceX's precision tag, optkg times the checkpoint's own "
                     f"quantisation, models.yaml native_quant: {why})" for m, why in sorted(native.items())
                     if any(r["model_path"] == m for r in others)) + "."]
    cells: dict[tuple, list] = defaultdict(list)
    for r in held:
        if "bare_ttft_ms" in r:
            cells[(r["backend"], r["system"])].append(r)
    for (be, sysname), xs in sorted(cells.items()):
        c = _cell_stats(xs)
        if c["optkg_tpot_same"] > c["bare_tpot"]:
            cause = "the calibration" if c["raw_tpot"] <= c["bare_tpot"] else "the uncalibrated composition"
            out.append(f"- {be} {sysname} ({c['n_bare']} rows): optkg {_pct(c['optkg_tpot_same'])}, uncal. "
                       f"{_pct(c['raw_tpot'])}, bare {_pct(c['bare_tpot'])}: {cause} makes it worse than bare")
    return out + [""]


def _limits(ok: list[dict]) -> list[str]:
    """Per held-out cell that misses a target: optkg's error beside the estimator's own on the same rows."""
    out = ["## What limits the cells that miss a target", "",
           "Held-out cells with >= 30 rows that miss TTFT <= 25 % or TPOT <= 15 %, with the bare estimator's error on "
           "the same rows: where the bare error is as large, the estimator's database limits the cell; where optkg's "
           "uncalibrated error is larger than bare's, optkg's composition does.", ""]
    cells: dict[tuple, list] = defaultdict(list)
    for r in ok:
        if r["split"] == "heldout":
            cells[(r["backend"], r["system"])].append(r)
    for (be, sysname), xs in sorted(cells.items()):
        s = _cell_stats(xs)
        if s["n"] < MIN_ROWS or (s["optkg_ttft"] <= 25 and s["optkg_tpot"] <= 15):
            continue
        groups: dict[str, list] = defaultdict(list)
        for r in xs:
            groups[f"{r['model_path']} {r.get('layout', '')}"].append(r)
        worst = max(groups.items(), key=lambda kv: sum(ape(r["optkg_tpot_ms"], r["tpot_ms"]) +
                                                       ape(r["optkg_ttft_ms"], r["ttft_ms"]) for r in kv[1]))
        w = _cell_stats(worst[1])
        out.append(f"- {be} {sysname}: TTFT optkg {_pct(s['optkg_ttft_same'])} vs bare {_pct(s['bare_ttft'])}, TPOT "
                   f"optkg {_pct(s['optkg_tpot_same'])} vs bare {_pct(s['bare_tpot'])} on the {s['n_bare']} rows both "
                   f"time; largest share: {worst[0]} ({w['n']} rows: TTFT {_pct(w['optkg_ttft'])}, TPOT "
                   f"{_pct(w['optkg_tpot'])}; bare {_pct(w['bare_ttft'])}, {_pct(w['bare_tpot'])})")
    return out + [""]


def _kv_binding(ok: list[dict]) -> list[str]:
    """Rows where optkg queues requests, by the cap that binds: optkg's KV capacity (the issue's target: optkg's
    error <= the bare estimator's there) or the engine's running-request setting."""
    out = ["## Rows where optkg's KV capacity binds (requests queue)", ""]
    for limit, what in (("kv_cache", "KV capacity binds"), (None, "the engine's running-request cap binds")):
        q = [r for r in ok if r.get("optkg_queued") and "bare_ttft_ms" in r
             and (r.get("optkg_cap_limit") == "kv_cache") == (limit == "kv_cache")]
        if not q and limit == "kv_cache":
            out.append("- none: no measured row runs more requests than optkg's KV capacity allows")
        for split in ("heldout", "train"):
            rs = [r for r in q if r["split"] == split]
            if rs:
                s = _cell_stats(rs)
                out.append(f"- {split}, {what}: {s['n']} rows; TTFT MAPE optkg {_pct(s['optkg_ttft'])} (uncal. "
                           f"{_pct(s['raw_ttft'])}) vs bare {_pct(s['bare_ttft'])}; TPOT MAPE optkg "
                           f"{_pct(s['optkg_tpot'])} (uncal. {_pct(s['raw_tpot'])}) vs bare {_pct(s['bare_tpot'])}")
    return out + [""]


def _duplicates(ok: list[dict]) -> list[str]:
    """Held-out rows whose measurement (GPU, lengths, TTFT, TPOT to 1e-4 ms) is also a train row: the CSV holds
    several dumps of the same runs under different configuration groups, so the split by group does not keep
    every measurement on one side."""
    train = {r["measurement"] for r in ok if r["split"] == "train"}
    held = [r for r in ok if r["split"] == "heldout"]
    unique = [r for r in held if r["measurement"] not in train]
    out = ["## Held-out measurements that are also train rows", "",
           f"{len(held) - len(unique)} of {len(held)} held-out rows with a number repeat a train row's measurement "
           "(the same run in another dump of the CSV, under another configuration group)."]
    if unique:
        s = _cell_stats(unique)
        out.append(f"On the {s['n']} held-out rows that do not: TTFT MAPE optkg {_pct(s['optkg_ttft'])} (uncal. "
                   f"{_pct(s['raw_ttft'])}, bare {_pct(s['bare_ttft'])}), TPOT {_pct(s['optkg_tpot'])} (uncal. "
                   f"{_pct(s['raw_tpot'])}, bare {_pct(s['bare_tpot'])}).")
    return out + [""]


def _corrections(recs: list[dict]) -> list[str]:
    """How many rows measured.py read differently from the CSV's columns, with the evidence the CSV itself holds."""
    agg = [r for r in recs if r["mode"] == "agg"]
    layout = [r for r in agg if r.get("corrected")]
    sig = [r for r in layout if "InferenceX" in r["corrected"]]
    dp = [r for r in layout if "attention data parallel" in r["corrected"]]
    # the same measurement recorded elsewhere with the corrected layout
    seen: dict[str, set] = defaultdict(set)
    for r in agg:
        if not r.get("corrected"):
            seen[r["measurement"]].add(r.get("layout"))
    twins = sum(1 for r in sig if r.get("layout") in seen.get(r["measurement"], ()))
    disagg_rows = [r for r in recs if r["mode"] != "agg"]
    dis_meas = {(r["system"], r["isl"], r["osl"], round(r["tpot_ms"], 1)) for r in disagg_rows}
    flagged = [r for r in agg if r.get("disagg_as_agg")]
    matched = sum(1 for r in flagged if (r["system"], r["isl"], r["osl"], round(r["tpot_ms"], 1)) in dis_meas)
    ix = [r for r in agg if r.get("source") == "inferencex"]
    launched = [r for r in ix if r.get("launch")]
    outside = [r for r in ix if r.get("outside_sweep") and not r.get("speculative")]
    spec = [r for r in ix if r.get("speculative")]
    spec_cells = Counter(f"{r['backend']} {r['system']}" for r in spec)
    return ["## Rows read differently from the CSV's columns (tools/accuracy/measured.py)", "",
            f"- {len(sig)} InferenceX rows record a `tp N, ep M` run on N x M GPUs; read as N GPUs. {twins} of them "
            "have a twin row (same GPU, lengths, TTFT and TPOT) recorded with the corrected layout.",
            f"- {len(dp)} MoE rows whose expert group spans more GPUs than their attention group: read as "
            "data-parallel attention.",
            f"- {len(flagged)} GB200 DeepSeek-R1 rows of the 2026-04-06 dump are disaggregated deployments recorded as "
            f"one aggregated engine: not evaluable; {matched} of them have a disaggregated row with the same GPU, "
            "lengths and TPOT (to 0.1 ms).",
            f"- {len(launched)} of {len(ix)} InferenceX aggregated rows launched with the engine flags of their "
            "script on the measurement day (launches.yaml); the rest (B300 / GB200, no optkg GPU, or scripts not "
            "found) with the engine's defaults.",
            f"- {len(spec)} InferenceX aggregated rows were measured by a sweep with speculative decoding (MTP; the "
            "`-mtp` configs of .github/configs/nvidia-master.yaml on days whose points only that config swept, "
            "launches.yaml `speculative`): not evaluable, optkg's estimate does not time speculation ("
            + ", ".join(f"{k} {v}" for k, v in sorted(spec_cells.items())) + ").",
            ] + ([f"- {len(outside)} InferenceX-dump rows lie outside the sweep InferenceX's config ran on their day "
                  "(.github/configs/nvidia-master.yaml, launches.yaml `search_space`): another sweep's runs, launched with "
                  "flags not published, so with the engine's defaults."] if outside else []) + [
            ""]


def _short(reason: str) -> str:
    """A reason without the row's own numbers and paths, so equal causes group together."""
    import re
    reason = re.sub(r"/\S+", "<path>", reason)
    reason = re.sub(r"\{[^}]*\}", "{...}", reason)
    return reason[:160]


def read_records(path: Path) -> list[dict]:
    """Rows a ``--csv`` run wrote, with their numbers as numbers and empty cells left out."""
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            rec = {k: v for k, v in r.items() if v != ""}
            for k in list(rec):
                if k.endswith("_ms") or k == "optkg_hold_steps":
                    rec[k] = float(rec[k])
                elif k in ("optkg_queued", "optkg_running", "optkg_kv_tokens", "concurrency", "mean_isl", "mean_osl"):
                    rec[k] = int(float(rec[k]))
                elif k in ("disagg_as_agg", "speculative"):
                    rec[k] = rec[k] == "True"
            out.append(rec)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, help="score only the first N rows (a quick look; the doc is not written)")
    ap.add_argument("--csv", type=Path, help="also write every scored row here")
    ap.add_argument("--only", metavar="REGEX", help="score only rows whose id|model|engine|GPU matches (a quick look; "
                                                   "the doc is not written)")
    ap.add_argument("--fit", action="store_true", help="refit kg/speed/calibration.yaml on the train split first")
    ap.add_argument("--fit-from", type=Path, metavar="CSV", help="with --fit: fit on the uncalibrated columns (raw_*) "
                                                                 "of rows a --csv run wrote instead of rescoring them")
    ap.add_argument("--check", action="store_true", help="only verify docs/speed-accuracy.md is up to date")
    ap.add_argument("--render-from", type=Path, metavar="CSV", help="print the report of rows a --csv run wrote "
                                                                    "(nothing is scored; the doc is not written)")
    args = ap.parse_args(argv)
    if args.check:
        want = input_digest()
        head = DOC.read_text(encoding="utf-8").splitlines()[0] if DOC.is_file() else ""
        if f"inputs digest {want};" not in head:
            print(f"{DOC.relative_to(REPO)} is stale (inputs digest {want}): run `make accuracy`", file=sys.stderr)
            return 1
        return 0
    if args.render_from:
        print(render(read_records(args.render_from), "(from CSV)"))
        return 0
    import logging
    logging.disable(logging.WARNING)
    with (package_dir() / "systems" / "silicon_sample.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    sc = Scorer()  # one scorer for both passes: each launch command is checked once
    if args.fit and args.fit_from:  # raw_* are the uncalibrated estimates whatever calibration the run had
        write_calibration(fit(read_records(args.fit_from)))
    elif args.fit:
        write_calibration({})  # fit against the uncalibrated estimates
        write_calibration(fit(score(rows, args.limit, True, args.only, sc)))
    recs = score(rows, args.limit, True, args.only, sc)
    if args.csv:
        keys = sorted({k for r in recs for k in r})
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, lineterminator="\n")
            w.writeheader()
            w.writerows(recs)
    text = render(recs, input_digest())
    if args.limit or args.only:
        print(text)
        return 0
    DOC.write_text(text + "\n", encoding="utf-8")
    write_accuracy(text)
    print(f"wrote {DOC.relative_to(REPO)}, {ACCURACY.relative_to(REPO)}", file=sys.stderr)
    return 0


def held_out_cells(doc: str) -> dict[str, dict]:
    """``"<engine>/<system>"`` -> ``{"rows", "ttft_mape", "tpot_mape"}`` (percent) from the held-out table of the
    accuracy doc: the errors check's Speed section states beside an estimate of that engine x GPU."""
    part = doc.split("## Held-out split", 1)[1].split("\n## ", 1)[0]
    cells = {}
    for line in part.splitlines():
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) < 6 or c[0] in ("engine", "all") or c[0].startswith("---"):
            continue
        cells[f"{c[0]}/{c[1]}"] = {"rows": int(c[2].replace(",", "")), "ttft_mape": float(c[3].rstrip(" %")),
                                   "tpot_mape": float(c[5].rstrip(" %"))}
    return cells


def write_accuracy(doc: str) -> None:
    import yaml
    head = ("# Held-out accuracy per engine x GPU (MAPE, percent), copied from docs/speed-accuracy.md by\n"
            "# `make accuracy` (tools/accuracy/run.py); check's Speed section states it beside each estimate.\n")
    ACCURACY.write_text(head + yaml.safe_dump({"source": "docs/speed-accuracy.md (held-out split)",
                                               "cells": held_out_cells(doc)}, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
