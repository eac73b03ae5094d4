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
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

DOC = REPO / "docs" / "speed-accuracy.md"
SPLIT = HERE / "split.csv"
MODELS = HERE / "models.yaml"
GROUP_KEYS = ("mode", "model_path", "system", "backend", "backend_version", "precision", "gemm_quant_mode",
              "moe_quant_mode", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
              "prefill_tp_size", "prefill_pp_size", "prefill_attention_dp_size", "prefill_moe_tp_size",
              "prefill_moe_ep_size", "prefill_num_workers", "decode_tp_size", "decode_pp_size",
              "decode_attention_dp_size", "decode_moe_tp_size", "decode_moe_ep_size", "decode_num_workers")
BARE_CTX_TOKENS = 8192
MIN_ROWS = 30  # targets apply to engine x GPU cells with at least this many held-out rows


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


def input_digest() -> str:
    """Digest of everything the doc depends on: the harness, split, model aliases, kg/speed sources and data,
    the measured CSV and the estimator's release."""
    from kg.speed.estimator import estimator_version
    h = hashlib.sha256()
    files = [Path(__file__), SPLIT, MODELS, *sorted((REPO / "kg" / "speed").glob("*.py")),
             *sorted((REPO / "kg" / "speed").glob("*.yaml")), package_dir() / "systems" / "silicon_sample.csv"]
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(str(estimator_version()).encode())
    return h.hexdigest()[:16]


def config_files(model_path: str, aliases: dict) -> dict[str, bytes]:
    cfg_id = (aliases.get(model_path) or {}).get("config", model_path)
    base = package_dir() / "model_configs" / cfg_id.replace("/", "--")
    f = Path(f"{base}_config.json")
    if not f.is_file():
        raise FileNotFoundError(f"no bundled config for {model_path}")
    out = {"config.json": f.read_bytes()}
    q = Path(f"{base}_hf_quant_config.json")
    if q.is_file():
        out["hf_quant_config.json"] = q.read_bytes()
    return out


def _len(r: dict) -> int:
    """The context length a benchmark of isl + osl tokens launches with (rounded up to 1,024)."""
    return math.ceil((int(r["isl"]) + int(r["osl"])) / 1024) * 1024


# engine -> launch command of the row's layout (optkg reads it as a user's command)
def _vllm_cmd(d: str, r: dict) -> str:
    tp, pp, adp, ep = (max(1, int(r[k] or 1)) for k in ("tp_size", "pp_size", "attention_dp_size", "moe_ep_size"))
    cmd = f"vllm serve {d} -tp {tp} -pp {pp} --max-model-len {_len(r)}" + (f" -dp {adp}" if adp > 1 else "")
    return cmd + (" --enable-expert-parallel" if ep > 1 else "")


def _sglang_cmd(d: str, r: dict) -> str:
    tp, pp, adp, ep = (max(1, int(r[k] or 1)) for k in ("tp_size", "pp_size", "attention_dp_size", "moe_ep_size"))
    cmd = f"python -m sglang.launch_server --model-path {d} --tp {tp * adp} --pp-size {pp} --context-length {_len(r)}"
    cmd += f" --dp {adp} --enable-dp-attention" if adp > 1 else ""
    return cmd + (f" --ep-size {ep}" if ep > 1 else "")


def _trtllm_cmd(d: str, r: dict) -> str:
    tp, pp, adp, ep = (max(1, int(r[k] or 1)) for k in ("tp_size", "pp_size", "attention_dp_size", "moe_ep_size"))
    return (f"trtllm-serve {d} --tp_size {tp * adp} --pp_size {pp} --max_seq_len {_len(r)}"
            + (f" --ep_size {ep}" if ep > 1 else ""))


COMMANDS = {"vllm": _vllm_cmd, "sglang": _sglang_cmd, "trtllm": _trtllm_cmd}
# the row's gemm quant mode -> ModelOpt's quant_algo of the checkpoint such a run serves
MODELOPT_ALGO = {"fp8": "FP8", "nvfp4": "NVFP4"}


class Scorer:
    def __init__(self):
        import yaml
        import kg
        from kg.core.cache import cache_dir
        self.kg = kg
        self.catalog = kg.load_catalog()
        self.rules = kg.load_rules("check")
        self.aliases = yaml.safe_load(MODELS.read_text())
        from kg.speed.estimator import tables
        self.hw = {v["system"]: k for k, v in tables()["systems"].items()}
        self.root = cache_dir()
        self.memo: dict[tuple, object] = {}  # check does not depend on concurrency: one per launch command

    def bare(self, r: dict) -> dict:
        from kg.speed.estimator import NotEvaluable, Point, model_dir, run_point
        from kg.speed.serving import cached
        from aiconfigurator_core.sdk import perf_database
        tp, pp, adp, mtp, mep = (max(1, int(r[k] or 1)) for k in ("tp_size", "pp_size", "attention_dp_size",
                                                           "moe_tp_size", "moe_ep_size"))
        try:
            folder, digest = model_dir(config_files(r["model_path"], self.aliases), self.root)
        except FileNotFoundError as e:
            return {"not_evaluable": str(e)}
        cur = (perf_database.get_version_slots(r["system"], r["backend"]) or {}).get("current")
        if cur is None:
            return {"not_evaluable": f"no {r['backend']} database for {r['system']}"}
        conc = int(r["batch_size"])
        p = Point(model=r["model_path"], config_digest=digest, system=r["system"], backend=r["backend"], release=cur,
                  tp_size=tp, pp_size=pp, attention_dp_size=adp, moe_tp_size=mtp, moe_ep_size=mep,
                  gemm_quant_mode=r["gemm_quant_mode"] or None, moe_quant_mode=r["moe_quant_mode"] or None,
                  kvcache_quant_mode=None, batch_size=max(1, math.ceil(conc / (pp * adp))), isl=int(r["isl"]),
                  osl=int(r["osl"]), ctx_tokens=BARE_CTX_TOKENS)
        try:
            return cached("speed-point", p.key(), lambda: run_point(p, str(folder)))
        except NotEvaluable as e:
            return {"not_evaluable": str(e)}

    def optkg(self, r: dict) -> dict:
        from kg.speed.serving import Workload, speed_for_stack
        from kg.speed.estimator import model_dir
        try:
            files = config_files(r["model_path"], self.aliases)
        except FileNotFoundError as e:
            return {"status": "not_evaluable", "reasons": [str(e)]}
        algo = MODELOPT_ALGO.get(r["gemm_quant_mode"])
        if algo and b"quantization_config" not in files["config.json"] and "hf_quant_config.json" not in files:
            # the measured run served the ModelOpt checkpoint of the model (nvidia/<model>-FP8 / -NVFP4): its
            # hf_quant_config.json beside the config, as ModelOpt writes it, FP8 KV cache included (as in every
            # ModelOpt hf_quant_config.json aiconfigurator-core bundles: nvidia--*-NVFP4, Qwen3-32B-FP8-Static)
            files["hf_quant_config.json"] = json.dumps(
                {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": algo, "kv_cache_quant_algo": "FP8"}}
            ).encode()
        folder, _ = model_dir(files, self.root)
        hw = self.hw.get(r["system"])
        if hw is None:
            return {"status": "not_evaluable", "reasons": [f"GPU {r['system']} is not in optkg's hardware catalog"]}
        cmd = COMMANDS[r["backend"]](str(folder), r)
        memo_key = (cmd, r["backend_version"], hw, r["attention_dp_size"])
        if memo_key not in self.memo:
            self.memo[memo_key] = self._check(cmd, r, hw)
        got = self.memo[memo_key]
        if isinstance(got, str):
            return {"status": "not_evaluable", "reasons": [got]}
        stack, report = got
        quant = {"gemm": r["gemm_quant_mode"] or None, "moe": r["moe_quant_mode"] or None}
        return speed_for_stack(stack, report, Workload(int(r["isl"]), int(r["osl"]), int(r["batch_size"])), quant)

    def _check(self, cmd: str, r: dict, hw: str):
        """(stack, check report dict) of the row's launch command, or the reason it cannot be read."""
        from kg.core.errors import OptkgError
        try:
            stack = None
            from kg.speed.estimator import _parse
            for version in ((r["backend_version"] if _parse(r["backend_version"]) else None), None):
                try:
                    stack = self.kg.stack_from_command(cmd, self.catalog, engine_version=version)
                    break
                except OptkgError:
                    if version is None:
                        raise
            stack.hardware = self.catalog.resolve_hardware(hw)
            tp, pp, adp = (max(1, int(r[k] or 1)) for k in ("tp_size", "pp_size", "attention_dp_size"))
            stack.gpu_count = tp * pp * adp
            if r["backend"] == "trtllm" and adp > 1:
                stack.settings["enable_dp_attention"] = True
            if r["backend"] == "trtllm" and MODELOPT_ALGO.get(r["gemm_quant_mode"]):
                # TensorRT-LLM takes the KV-cache quantisation of a ModelOpt checkpoint (kv_cache_quant_algo FP8 in
                # its hf_quant_config.json) as its KV dtype; optkg's TensorRT-LLM reader does not read it yet
                from kg.inputs.stack import set_setting
                set_setting(stack, "kv_cache_dtype", "fp8", "accuracy harness", self.catalog)
            return stack, self.kg.check(stack, self.catalog, self.rules).to_dict()
        except OptkgError as e:
            return f"optkg could not read the stack: {e}"


def ape(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas * 100.0


def mape(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def score(rows: list[dict], limit: int | None, progress: bool) -> list[dict]:
    split = load_split()
    sc = Scorer()
    out = []
    todo = rows[:limit] if limit else rows
    t0 = time.time()
    for i, r in enumerate(todo):
        rec = {k: r[k] for k in ("id", "mode", "backend", "backend_version", "system", "model_path", "isl", "osl",
                                 "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_ep_size",
                                 "gemm_quant_mode")}
        rec["split"] = split.get(group_of(r), "unsplit")
        rec["ttft_ms"], rec["tpot_ms"] = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])
        if r["mode"] != "agg":
            rec["optkg_status"] = "not_evaluable"
            rec["optkg_reason"] = "disaggregated serving (separate prefill and decode workers) is not a stack optkg checks"
            out.append(rec)
            continue
        b = sc.bare(r)
        if "not_evaluable" in b:
            rec["bare_reason"] = b["not_evaluable"]
        else:
            rec["bare_ttft_ms"], rec["bare_tpot_ms"] = b["ttft_ms"], b["tpot_ms"]
        o = sc.optkg(r)
        rec["optkg_status"] = o["status"]
        if o["status"] == "ok":
            rec["optkg_ttft_ms"], rec["optkg_tpot_ms"] = o["ttft_ms"], o["itl_ms"]
            rec["optkg_queued"] = o["queued"]
            rec["raw_ttft_ms"], rec["raw_tpot_ms"] = o["uncalibrated"]["ttft_ms"], o["uncalibrated"]["itl_ms"]
            rec["optkg_release"] = o["estimator"]["database_release"]
        else:
            rec["optkg_reason"] = "; ".join(o["reasons"])[:300]
        out.append(rec)
        if progress and (i + 1) % 100 == 0:
            print(f"  {i + 1:,}/{len(todo):,} rows ({time.time() - t0:,.0f} s)", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------
# calibration (fitted on the train split only) and the report

CALIBRATION = REPO / "kg" / "speed" / "calibration.yaml"


def _lsq(rows: list[tuple[float, float, float]]) -> list[float]:
    """Least squares of log(measured / estimated) = a + b log2(concurrency) + c log2(isl)."""
    import numpy as np
    x = np.array([[1.0, math.log2(c), math.log2(i)] for c, i, _ in rows])
    y = np.array([math.log(q) for _, _, q in rows])
    return [round(float(v), 5) for v in np.linalg.lstsq(x, y, rcond=None)[0]]


def fit(recs: list[dict]) -> dict:
    """Per engine x GPU cell with >= MIN_ROWS train rows, and per engine over all its GPUs (``<engine>/*``,
    the fallback), the least-squares fit of log(measured / optkg-uncalibrated) on log2(concurrency) and
    log2(isl), for TTFT and TPOT; TRAIN rows only. Ratios beyond 20x either way (rows where optkg's KV cap
    and the measured run disagree by a queue) are left out of the fit."""
    cells: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in recs:
        if r["split"] != "train" or "raw_ttft_ms" not in r or r.get("optkg_queued"):
            continue
        for key in (f"{r['backend']}/{r['system']}", f"{r['backend']}/*"):
            for m, raw in (("ttft", "raw_ttft_ms"), ("tpot", "raw_tpot_ms")):
                q = r[f"{m}_ms"] / r[raw]
                if 1 / 20 < q < 20:
                    cells[key][m].append((int(r["batch_size"]), int(r["isl"]), q))
    out = {}
    for k in sorted(cells):
        n = min(len(cells[k]["ttft"]), len(cells[k]["tpot"]))
        if n >= MIN_ROWS:
            out[k] = {"ttft": _lsq(cells[k]["ttft"]), "tpot": _lsq(cells[k]["tpot"]), "train_rows": n}
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
                         "model": "measured / estimated = exp(a + b log2(concurrency) + c log2(isl)); [a, b, c] "
                                  "by least squares on the train rows of the cell (<engine>/*: all GPUs)",
                         "adapter": ADAPTER_VERSION, "tool": "tools/accuracy/run.py --fit"},
           "cells": cells}
    CALIBRATION.write_text(head + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _cell_stats(recs: list[dict]) -> dict:
    o_t = [ape(r["optkg_ttft_ms"], r["ttft_ms"]) for r in recs]
    o_p = [ape(r["optkg_tpot_ms"], r["tpot_ms"]) for r in recs]
    both = [r for r in recs if "bare_ttft_ms" in r]
    return {"n": len(recs), "optkg_ttft": mape(o_t), "optkg_tpot": mape(o_p), "n_bare": len(both),
            "bare_ttft": mape([ape(r["bare_ttft_ms"], r["ttft_ms"]) for r in both]),
            "bare_tpot": mape([ape(r["bare_tpot_ms"], r["tpot_ms"]) for r in both])}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def render(recs: list[dict], digest: str) -> str:
    from kg.speed.estimator import estimator_version
    agg = [r for r in recs if r["mode"] == "agg"]
    ok = [r for r in agg if r.get("optkg_status") == "ok"]
    lines = [f"<!-- generated by `make accuracy` (tools/accuracy/run.py); inputs digest {digest}; do not edit -->",
             "# Serving speed: accuracy against measured rows", "",
             f"Measured: aiconfigurator-core {estimator_version()} `systems/silicon_sample.csv`, {len(recs):,} rows "
             f"({len(agg):,} aggregated, {len(recs) - len(agg):,} disaggregated). optkg = `check`'s Speed section "
             "(kg.speed.serving: infeasible stacks refused, running requests capped by optkg's KV capacity and the "
             "engine's cap with the rest queued, engine release mapped to the nearest database release, "
             "per engine x GPU calibration fitted on the train split, kg/speed/calibration.yaml); bare = "
             "aiconfigurator-core's `run_agg` at its current database release. MAPE = mean of "
             "|estimate - measured| / measured. Split: tools/accuracy/split.csv (by configuration group; "
             "held-out never fitted on).", ""]
    n_num = len(ok)
    n_reason = sum(1 for r in recs if r.get("optkg_status") in ("infeasible", "not_evaluable"))
    lines += ["## Coverage", "",
              f"- rows with a number: {n_num:,}; with a stated reason (infeasible or not evaluable): {n_reason:,}; "
              f"neither: {len(recs) - n_num - n_reason:,} ({(n_num + n_reason) / len(recs) * 100:.1f} % answered)", ""]
    for split in ("heldout", "train"):
        lines += [f"## {'Held-out' if split == 'heldout' else 'Train'} split", "",
                  "| engine | GPU | rows | TTFT MAPE optkg | TTFT MAPE bare | TPOT MAPE optkg | TPOT MAPE bare |"
                  + (" targets (TTFT <= 25 %, TPOT <= 15 %) |" if split == "heldout" else ""),
                  "|---|---|---:|---:|---:|---:|---:|" + ("---|" if split == "heldout" else "")]
        cells: dict[tuple, list] = defaultdict(list)
        for r in ok:
            if r["split"] == split:
                cells[(r["backend"], r["system"])].append(r)
        for (be, sysname), rs in sorted(cells.items()):
            s = _cell_stats(rs)
            row = (f"| {be} | {sysname} | {s['n']} | {_pct(s['optkg_ttft'])} | {_pct(s['bare_ttft'])} | "
                   f"{_pct(s['optkg_tpot'])} | {_pct(s['bare_tpot'])} |")
            if split == "heldout":
                met = (s["optkg_ttft"] <= 25 and s["optkg_tpot"] <= 15) if s["n"] >= MIN_ROWS else None
                row += f" {'-' if met is None else ('met' if met else '**not met**')} |"
            lines.append(row)
        s = _cell_stats([r for r in ok if r["split"] == split]) if any(r["split"] == split for r in ok) else None
        if s:
            lines.append(f"| all | all | {s['n']} | {_pct(s['optkg_ttft'])} | {_pct(s['bare_ttft'])} | "
                         f"{_pct(s['optkg_tpot'])} | {_pct(s['bare_tpot'])} |" + (" |" if split == "heldout" else ""))
        lines.append("")
    kvb = [r for r in ok if r.get("optkg_queued") and "bare_ttft_ms" in r]
    lines += ["## Rows where optkg's KV capacity binds (requests queue)", ""]
    if kvb:
        for split in ("heldout", "train"):
            rs = [r for r in kvb if r["split"] == split]
            if rs:
                s = _cell_stats(rs)
                lines.append(f"- {split}: {s['n']} rows; TTFT MAPE optkg {_pct(s['optkg_ttft'])} vs bare "
                             f"{_pct(s['bare_ttft'])}; TPOT MAPE optkg {_pct(s['optkg_tpot'])} vs bare "
                             f"{_pct(s['bare_tpot'])}")
    else:
        lines.append("- none: no measured row runs more requests than optkg's KV capacity allows")
    lines.append("")
    for status, title in (("infeasible", "Rows optkg calls infeasible (measured: they ran)"),
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


def _short(reason: str) -> str:
    """A reason without the row's own numbers and paths, so equal causes group together."""
    import re
    reason = re.sub(r"/\S+", "<path>", reason)
    reason = re.sub(r"\{[^}]*\}", "{...}", reason)
    return reason[:160]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, help="score only the first N rows (a quick look; the doc is not written)")
    ap.add_argument("--csv", type=Path, help="also write every scored row here")
    ap.add_argument("--fit", action="store_true", help="refit kg/speed/calibration.yaml on the train split first")
    ap.add_argument("--check", action="store_true", help="only verify docs/speed-accuracy.md is up to date")
    args = ap.parse_args(argv)
    if args.check:
        want = input_digest()
        head = DOC.read_text(encoding="utf-8").splitlines()[0] if DOC.is_file() else ""
        if f"inputs digest {want};" not in head:
            print(f"{DOC.relative_to(REPO)} is stale (inputs digest {want}): run `make accuracy`", file=sys.stderr)
            return 1
        return 0
    import logging
    logging.disable(logging.WARNING)
    with (package_dir() / "systems" / "silicon_sample.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    if args.fit:
        write_calibration({})  # fit against the uncalibrated estimates
        write_calibration(fit(score(rows, args.limit, True)))
    recs = score(rows, args.limit, True)
    if args.csv:
        keys = sorted({k for r in recs for k in r})
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, lineterminator="\n")
            w.writeheader()
            w.writerows(recs)
    text = render(recs, input_digest())
    if args.limit:
        print(text)
        return 0
    DOC.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {DOC.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
