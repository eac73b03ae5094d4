"""``optkg diagnose``: which wall am I on (memory, compute, bandwidth, or neither), from real metrics.

Flow (one way): ``kg.inputs.metrics.snapshot.Snapshot`` -> ``snapshot_namespace`` (facts + flat namespace) ->
``evaluate_rules(load_ruleset('diagnose'), ...)`` over ``rules/walls.yaml`` -> verdict, walls,
operator-layer gate, collection checklist -> catalog techniques for each wall (and, with a stack,
which of them collide with the user's techniques, via ``kg.analyses.check.check_stack``) -> a report dict
(``schema_version``, ``kind: diagnose``) rendered as text, JSON or markdown (kg.output.diagnose_report).

Modules: kg.analyses.diagnose_namespace (snapshot -> facts, namespace, checklist),
kg.analyses.diagnose_links (catalog techniques per wall, links to the stack), this module (thresholds,
verdict, the whole diagnosis, the fixture runner).

Which metric stands for which reading (shared/reference/existing_tools.md §3):

- memory occupancy: for a serving engine that preallocates (vLLM ``gpu_memory_utilization``,
  SGLang ``mem_fraction_static``) it is KV-pool pressure (``kv_cache_usage`` read together with
  waiting requests, preemptions in the window, or SGLang retractions); raw device memory
  (``fb_used / fb_total``) counts only for stacks that do not preallocate.
- compute utilisation: ``DCGM_FI_PROF_SM_ACTIVE`` (``compute_metric = 'sm_active'``); else time-based
  utilisation (``DCGM_FI_DEV_GPU_UTIL``, nvidia-smi ``utilization.gpu``, dmon ``sm``,
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``: ``'time_based'``, low confidence when high); else tensor-pipe
  activity (``'tensor_active'``).
- bandwidth: ``DCGM_FI_PROF_DRAM_ACTIVE`` (``'dram_active'``); else the coarser
  ``utilization.memory`` / ``DCGM_FI_DEV_MEM_COPY_UTIL`` (``'mem_copy_util'``).
Across GPUs the worst (highest) device counts; per-device readings are kept in the report.

Facts given to the engine: ``{kind: snapshot, workload}``, ``{kind: serving, engine}`` when engine
metrics are present, ``{kind: gpu, compute_metric, bandwidth_metric}`` when GPU metrics are present.

Namespace names rules read (fractions 0-1 unless a unit is in the name). Always present:
``workload`` (serving|training|generate|unknown), ``serving``, ``preallocated``, ``engine``,
``has_compute``, ``has_bandwidth``, ``has_tensor``, ``has_device_memory``, ``has_power_ratio``,
``has_video``, ``has_retracted``, ``has_scrape_window``, ``has_memory_occupancy``,
``throughput_known`` (measured throughput and a target both known), ``throughput_short``,
``compute_metric``, ``bandwidth_metric``, ``kpis_missing_count``, ``resources_missing_count``,
``context_missing_count``, ``context_present_count`` and display strings (``*_text``, ``*_label``,
``*_caveat``, ``compute_claim``). Present only when read: ``kv_cache_usage``, ``requests_waiting``,
``requests_running``, ``preemptions_total``, ``preemptions_new`` (window), ``retracted_requests``,
``compute_util``, ``bandwidth_util``, ``tensor_active``, ``device_memory_used_fraction``,
``power_w``, ``power_limit_w``, ``power_ratio``, ``video_engine_util``, ``memory_occupancy``,
``throughput_tokens_per_s`` (output tokens/s), ``target_throughput_tokens_per_s``,
``throughput_shortfall`` (1 - measured/target), ``prefix_cache_hit_rate``,
``window_generation_tokens`` (output tokens generated between two scrapes). Thresholds from
``rules/walls.yaml`` (or ``--thresholds``) are added by the rule evaluator under their names.

Whether the inputs belong together (always present): ``invalid_readings_count`` (readings that
parsed but cannot be true, kg.inputs.metrics ``Snapshot.invalid``), ``gpu_model_count`` and
``host_count`` (distinct GPU model names / host names over all inputs), ``model_mismatch`` (the
served model in the engine metrics, label ``model_name``, is not the model of --stack/--vllm/
--sglang; False when either is unknown), with ``*_text`` strings naming files and values.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.analyses.diagnose_links import _stage, stack_links, wall_techniques
from kg.analyses.diagnose_namespace import snapshot_namespace
from kg.core.errors import OptkgError
from kg.engine.rules import Firing, RuleSet, SEVERITY_ORDER, evaluate_rules
from kg.inputs.metrics.load import load_snapshot
from kg.inputs.metrics.snapshot import Snapshot


SCHEMA_VERSION = "1.0"
WALL_RULES = (("memory", "memory-wall"), ("compute", "compute-wall"), ("bandwidth", "bandwidth-wall"))
INPUT_TAG = "input-consistency"  # rules that say whether the inputs belong together (shown first)
FAIL_ON = ("low", "moderate", "severe", "critical", "never")


# ---------------------------------------------------------------------------------------------
# thresholds

def load_thresholds(path: Path | str, ruleset: RuleSet) -> tuple[dict[str, float], dict[str, str]]:
    """Read a thresholds override file: ``{name: value}`` or ``{thresholds: {name: value | {value: ...}}}``.

    Returns (name -> value, name -> 'file:line'). Raises OptkgError naming file:line for unknown
    names, non-numbers, and fractions outside 0-1.
    """
    from kg.core.yamlio import load_yaml
    doc = load_yaml(path)
    d = doc.data
    if doc.duplicate_keys:
        key, line, _, first = doc.duplicate_keys[0]
        raise OptkgError(f"{path}:{line}: threshold '{key[-1]}' is given twice (first at line {first}); keep one")
    if not isinstance(d, dict):
        raise OptkgError(f"{path}:1: a thresholds file is a mapping {{threshold_name: value}}")
    base: tuple = ()
    if "thresholds" in d:
        extra = sorted(set(d) - {"thresholds", "description"})
        if extra or not isinstance(d["thresholds"], dict):
            line, _ = doc.where((extra[0],) if extra else ("thresholds",))
            raise OptkgError(f"{path}:{line}: expected `thresholds: {{name: value}}` (and an optional description)")
        d, base = d["thresholds"], ("thresholds",)
    out: dict[str, float] = {}
    where: dict[str, str] = {}
    known = ruleset.thresholds
    for name, v in d.items():
        line, _ = doc.where(base + (name,))
        if name not in known:
            from difflib import get_close_matches
            near = get_close_matches(str(name), list(known), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise OptkgError(f"{path}:{line}: unknown threshold '{name}'{hint} (known: {', '.join(sorted(known))})")
        if isinstance(v, dict):
            v = v.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OptkgError(f"{path}:{line}: {name}: expected a number, found {v!r}")
        if known[name].get("unit") == "fraction" and not 0.0 <= float(v) <= 1.0:
            raise OptkgError(f"{path}:{line}: {name}: expected a fraction 0-1 (0.9 means 90 %), found {v}")
        out[str(name)], where[str(name)] = float(v), f"{path}:{line}"
    # pairs the rules read as ordered (low < high); checked on the merged values (overrides over defaults)
    merged = {k: float(t["value"]) for k, t in known.items()} | out
    for low, high in THRESHOLD_ORDER:
        if low in merged and high in merged and (low in out or high in out) and not merged[low] < merged[high]:
            at = where.get(low) or where.get(high)
            raise OptkgError(f"{at}: {low} ({merged[low]:g}) must be below {high} ({merged[high]:g})"
                             f"{'' if low in out and high in out else ' (the other is the default)'}")
    return out, where


# threshold pairs the rules need ordered (first < second): idle below low activity, a disguised-memory-wall
# reading below the compute wall, idle below the engine-idle busy reading, the severe shortfall below the critical
THRESHOLD_ORDER = (("idle_util", "neither_wall_util"), ("compute_disguise_util", "compute_wall_util"),
                   ("idle_util", "engine_idle_gpu_busy_util"), ("shortfall_severe", "shortfall_critical"))


def thresholds_used(ruleset: RuleSet, overrides: dict[str, float] | None, where: dict[str, str] | None) -> dict[str, Any]:
    out = {}
    for name, t in sorted(ruleset.thresholds.items()):
        o = (overrides or {}).get(name)
        out[name] = {"value": o if o is not None else t["value"], "default": t["value"], "unit": t.get("unit"),
                     "source": f"override ({(where or {}).get(name, 'given')})" if o is not None else "default",
                     "provenance": t["provenance"], "note": t.get("note", "")}
    return out


# ---------------------------------------------------------------------------------------------
# the whole diagnosis

def _finding(f: Firing) -> dict[str, Any]:
    r = f.rule
    return {"rule_id": r.id, "title": r.title, "severity": f.severity, "message": " ".join(f.message.split()),
            "numbers": f.numbers, "tags": r.tags, "parent": r.parent, "cost_dimension": r.cost_dimension,
            "mechanism": " ".join(r.mechanism.split()), "fix": " ".join(r.fix.split()), "fixes": r.fixes,
            "sources": r.sources, "rule_file": r.file, "rule_line": r.line}


def _wall_status(wall: str, ns: dict[str, Any], th: dict[str, float]) -> str:
    """One line: why a wall did not fire, in readings rather than the rule's condition text."""
    t = th.__getitem__
    if wall == "memory":
        if ns["preallocated"]:
            if "kv_cache_usage" not in ns and ns.get("memory_invalid_text"):
                return f"reading invalid: {ns['memory_invalid_text']}"
            if "kv_cache_usage" not in ns:
                return "not measured: a preallocating server needs its KV-cache usage (engine /metrics)"
            return (f"{ns['memory_text']}: the wall needs KV usage above {t('memory_wall_kv_usage'):.0%} together with "
                    "waiting requests, preemptions or retractions")
        if not ns["has_device_memory"]:
            return "not measured"
        return f"{ns['memory_text']}, not above {t('memory_wall_occupancy'):.0%}"
    if wall == "compute":
        if not ns["has_compute"] and ns.get("compute_invalid_text"):
            return f"reading invalid: {ns['compute_invalid_text']}"
        if not ns["has_compute"]:
            return "not measured (no GPU utilisation metrics)"
        if ns["compute_util"] <= t("compute_wall_util"):
            return f"{ns['compute_text']}, not above {t('compute_wall_util'):.0%}"
        if ns["throughput_known"] and not ns["throughput_short"]:
            return f"{ns['compute_text']} but {ns['throughput_text']}: saturated, not a wall"
        return f"{ns['compute_text']}, contradicted by power ({ns.get('power_ratio', 0):.0%} of the limit)"
    if not ns["has_bandwidth"] and ns.get("bandwidth_invalid_text"):
        return f"reading invalid: {ns['bandwidth_invalid_text']}"
    if not ns["has_bandwidth"]:
        return "not measured (no DRAM activity or memory utilisation metrics)"
    return f"{ns['bandwidth_text']}, not above {t('bandwidth_wall_util'):.0%}"


def _verdict(by_id: dict[str, Firing], ns: dict[str, Any], comparable: bool, context_missing: str) -> dict[str, Any]:
    fired = lambda rid: rid in by_id and by_id[rid].fired  # noqa: E731
    walls = [(w, rid) for w, rid in WALL_RULES if fired(rid)]
    v: dict[str, Any]
    disagree = next((r for r in ("metrics-disagree", "gpu-readings-disagree") if fired(r)), None)
    if disagree:
        f = by_id[disagree]
        v = {"kind": "inconsistent", "state": "metrics-disagree",
             "label": "metrics disagree: not from the same run", "severity": f.severity,
             "confidence": None, "rule_id": disagree, "message": " ".join(f.message.split()),
             "also": [], "walls_read_separately": [w for w, _ in walls]}
    elif walls:
        order = {w: i for i, (w, _) in enumerate(WALL_RULES)}
        walls.sort(key=lambda x: (-SEVERITY_ORDER.get(by_id[x[1]].severity or "", 0), order[x[0]]))
        wall, rid = walls[0]
        f = by_id[rid]
        state = f"{wall}-wall"
        label = {"memory": "memory wall", "bandwidth": "memory-bandwidth wall",
                 "compute": "compute wall" if ns.get("compute_claim") == "confirmed" else "compute saturation likely"}[wall]
        if wall == "memory" and fired("memory-wall-idle-compute"):
            state, label = "memory-wall-looks-like-idle-compute", "memory wall that looks like idle compute: fix memory first"
        v = {"kind": wall, "state": state, "label": label, "severity": f.severity,
             "confidence": f.numbers.get("confidence"), "rule_id": rid, "message": " ".join(f.message.split()),
             "also": [w for w, _ in walls[1:]]}
    elif fired("neither-wall"):
        f = by_id["neither-wall"]
        for rid, state, label in (("neither-wall-not-loaded", "not-loaded", "not loaded"),
                                  ("neither-wall-idle", "idle", "idle"),
                                  ("neither-wall-video-engines", "video-engines", "video engines busy, SMs idle"),
                                  ("neither-wall-latency-bound", "latency-bound", "latency-, host- or launch-bound")):
            if fired(rid):
                sub = by_id[rid]
                break
        else:
            sub, state, label = f, "neither-wall", "neither wall"
        v = {"kind": "neither", "state": state, "label": f"{label} (neither wall)", "severity": sub.severity,
             "confidence": f.numbers.get("confidence"), "rule_id": sub.rule.id, "message": " ".join(sub.message.split()),
             "also": []}
    elif fired("queue-without-kv-pressure"):
        f = by_id["queue-without-kv-pressure"]
        v = {"kind": "neither", "state": "scheduler-limited", "label": "requests queue with room in the KV pool (scheduler-limited)",
             "severity": f.severity, "confidence": "medium", "rule_id": f.rule.id, "message": " ".join(f.message.split()),
             "also": []}
    else:
        need = [n for n, ok in (("compute", ns["has_compute"]), ("bandwidth", ns["has_bandwidth"]),
                                ("memory", ns["has_memory_occupancy"])) if not ok]
        why = "no wall threshold is crossed and the readings are between the walls"
        if fired("time-util-contradicted"):
            why = "time-based utilisation is high but power contradicts it: " + " ".join(by_id["time-util-contradicted"].message.split())
        elif need:
            bad = [n for n in need if ns.get(f"{n}_invalid_text")]
            miss = [n for n in need if n not in bad]
            parts = ([f"{', '.join(bad)} read but invalid ({'; '.join(ns[f'{n}_invalid_text'] for n in bad)})"] if bad else []) + \
                ([f"missing {', '.join(miss)}"] if miss else [])
            why = "not enough readings: " + "; ".join(parts)
        v = {"kind": "inconclusive", "state": "inconclusive", "label": "inconclusive", "severity": "info",
             "confidence": None, "rule_id": None, "message": why, "also": []}
    v["comparable"] = comparable
    if not comparable:
        v["comparability"] = f"cannot be compared with another run: missing context ({context_missing})"
    return v


def diagnose(snap: Snapshot, ruleset: RuleSet, catalog=None, stack=None, target_throughput: float | None = None,
             workload: str | None = None, thresholds: dict[str, float] | None = None,
             thresholds_where: dict[str, str] | None = None, check_rules: RuleSet | None = None) -> dict[str, Any]:
    """Diagnose ``snap``; returns the report dict (``schema_version``, ``kind: diagnose``; see module doc).

    ``catalog``: a Catalog, or a zero-argument callable returning one (called only when a wall
    fires and its techniques are linked), or None for no technique links.
    """
    facts, ns, der = snapshot_namespace(snap, stack, target_throughput, workload)
    firings = evaluate_rules(ruleset, facts, ns, thresholds=thresholds)
    th = {k: float(v["value"]) for k, v in thresholds_used(ruleset, thresholds, thresholds_where).items()}
    by_id = {f.rule.id: f for f in firings}
    findings = [_finding(f) for f in firings if f.fired]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x["severity"], 0), x["rule_id"]))
    ctx_missing = ", ".join(i["label"] for g in der.checklist["groups"] if g["id"] == "context"
                            for i in g["items"] if i["status"] == "missing")
    verdict = _verdict(by_id, ns, der.checklist["comparable"], ctx_missing)
    stage = _stage(ns["workload"], stack)
    walls: dict[str, Any] = {}
    links_first: list[dict[str, Any]] = []
    for wall, rid in WALL_RULES:
        f = by_id.get(rid)
        if f is None:
            continue
        entry: dict[str, Any] = {"rule_id": rid, "fired": f.fired, "severity": f.severity,
                                 "confidence": f.numbers.get("confidence") if f.fired else None,
                                 "message": " ".join(f.message.split()) if f.fired else None,
                                 "reason": None if f.fired else f.reason, "numbers": f.numbers,
                                 "dimension": f.rule.cost_dimension, "direction": " ".join(f.rule.fix.split()),
                                 "details": [_finding(c) for c in firings if c.fired and c.rule.parent == rid]}
        if f.fired and catalog is not None and f.rule.cost_dimension:
            if not hasattr(catalog, "techniques"):
                catalog = catalog()
            kws = [t.split(":", 1)[1] for t in f.rule.tags if t.startswith("benefit:")]
            cands = wall_techniques(catalog, f.rule.cost_dimension, stage, kws, f.rule.fixes)
            if stack is not None and check_rules is not None:
                entry["stack"] = stack_links(stack, catalog, check_rules, cands)
                links_first += entry["stack"]["first"]
            entry["techniques"] = cands
        walls[wall] = entry
    for wall, entry in walls.items():
        entry["status"] = entry["message"] if entry["fired"] else _wall_status(wall, ns, th)
    nf = by_id.get("neither-wall")
    if nf is not None:
        walls["neither"] = {"rule_id": "neither-wall", "fired": nf.fired, "severity": nf.severity,
                            "confidence": nf.numbers.get("confidence") if nf.fired else None,
                            "message": " ".join(nf.message.split()) if nf.fired else None,
                            "reason": None if nf.fired else nf.reason,
                            "details": [_finding(c) for c in firings if c.fired and c.rule.parent == "neither-wall"],
                            "status": " ".join(nf.message.split()) if nf.fired else
                            "a wall binds, something is queued, or the readings do not show both compute and "
                            "bandwidth low"}
    gate_open, gate_closed = by_id.get("operator-gate-open"), by_id.get("operator-gate-closed")
    if gate_open is not None and gate_open.fired:
        gate = {"state": "open", "justified": True, "message": " ".join(gate_open.message.split())}
    elif gate_closed is not None and gate_closed.fired:
        gate = {"state": "closed", "justified": False, "message": " ".join(gate_closed.message.split())}
    else:
        need = [n for n, ok in (("a compute reading", ns["has_compute"]), ("a memory reading", ns["has_memory_occupancy"]),
                                ("measured throughput", "throughput_tokens_per_s" in ns),
                                ("--target-throughput", "target_throughput_tokens_per_s" in ns)) if not ok]
        if need:
            gate = {"state": "undecided", "justified": None, "message": "needs " + ", ".join(need)}
        elif not ns["throughput_short"]:
            gate = {"state": "not-needed", "justified": False, "message": "throughput meets the target"}
        else:
            hi, lo = (("compute", "memory") if ns["compute_util"] >= th["operator_gate_compute"] else ("memory", "compute"))
            gate = {"state": "wall-first", "justified": None,
                    "message": f"{hi} is at its limit and {lo} is not: the gate (both below, or both at, their limits) "
                               f"does not decide; follow the {hi} wall's direction"}
    d: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": "diagnose",
        "inputs": [s.to_dict() for s in snap.sources],
        "workload": ns["workload"], "engine": None if ns["engine"] == "none" else ns["engine"],
        "verdict": verdict, "walls": walls, "operator_gate": gate, "checklist": der.checklist,
        "findings": findings,
        "not_fired": [{"rule": f.rule.id, "reason": f.reason} for f in firings if not f.fired],
        "readings": der.readings, "reading_sources": dict(sorted(der.where.items())), "serving": der.serving,
        "devices": [{"key": k, "name": dv.name, "readings": dict(sorted(dv.readings.items())),
                     "where": dict(sorted(dv.where.items()))} for k, dv in sorted(snap.devices.items())],
        "thresholds": thresholds_used(ruleset, thresholds, thresholds_where),
        "unknown_metrics": snap.unknown_metrics,
        "invalid_readings": [i.to_dict() for i in snap.invalid],
        "input_warnings": [x for x in findings if INPUT_TAG in x["tags"]],
        "machines": snap.machines,
        "notes": snap.notes + der.notes,
        "stack": None,
    }
    if stack is not None:
        from kg.analyses.check import describe_stack
        d["stack"] = describe_stack(stack)
    return d


def fail_code(d: dict[str, Any], fail_on: str) -> int:
    """1 when a wall (memory, compute, bandwidth) fired at or above ``fail_on``; 'never' disables."""
    if fail_on == "never":
        return 0
    if fail_on not in SEVERITY_ORDER:
        raise OptkgError(f"--fail-on: expected one of {', '.join(FAIL_ON)}, found {fail_on!r}")
    limit = SEVERITY_ORDER[fail_on]
    for wall, _ in WALL_RULES:
        w = d["walls"].get(wall)
        if w and w["fired"] and SEVERITY_ORDER.get(w["severity"] or "", 0) >= limit:
            return 1
    return 0


# ---------------------------------------------------------------------------------------------
# fixture runner (kg/analyses/fixtures.py RUNNERS['diagnose'])

FIXTURE_KEYS = {"files", "before", "text", "window_s", "phase", "target_throughput", "workload", "thresholds", "stack"}


def run_fixture(data: dict[str, Any], catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``diagnose`` ruleset.

    ``data`` keys: ``files`` (metric files, relative to the fixture file), ``before`` (earlier
    scrapes), ``text`` (inline metrics text, any supported format), ``window_s``, ``phase``,
    ``target_throughput`` (output tokens/s), ``workload``, ``thresholds`` ({name: value}),
    ``stack`` (a stack mapping, stack-file shape).
    """
    if not isinstance(data, dict):
        raise OptkgError(f"{base_dir}: a diagnose fixture input is a mapping with keys {', '.join(sorted(FIXTURE_KEYS))}")
    bad = sorted(set(data) - FIXTURE_KEYS)
    if bad:
        raise OptkgError(f"{base_dir}: unknown diagnose fixture key(s) {', '.join(bad)} (keys: {', '.join(sorted(FIXTURE_KEYS))})")
    base = Path(base_dir)

    def paths(key: str) -> list[Path]:
        v = data.get(key) or []
        return [base / p for p in ([v] if isinstance(v, str) else v)]
    texts = data.get("text") or []
    texts = [texts] if isinstance(texts, str) else texts
    snap = load_snapshot(paths("files"), before=paths("before"), window_s=data.get("window_s"),
                         phase=data.get("phase", "load"), texts=[(f"<inline text {i}>", t) for i, t in enumerate(texts)])
    stack = None
    if data.get("stack") is not None:
        from kg.inputs.stack import stack_from_doc
        from kg.core.yamlio import YamlDoc
        stack = stack_from_doc(YamlDoc(str(base), data["stack"], {}), catalog, base)
    facts, ns, _ = snapshot_namespace(snap, stack, data.get("target_throughput"), data.get("workload"))
    return evaluate_rules(rules, facts, ns, thresholds=data.get("thresholds"))
