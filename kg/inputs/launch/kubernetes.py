"""Kubernetes manifests: the serving containers of Deployments, StatefulSets, DaemonSets, ReplicaSets,
Jobs, CronJobs, Pods and LeaderWorkerSets (multi-document files; ``List`` items too).

Per container: ``command`` (replaces the image's entrypoint) + ``args``, ``env`` (``value``;
``valueFrom`` is noted as unknown), the GPU count from ``resources.limits`` (else ``requests``)
``nvidia.com/gpu`` / ``amd.com/gpu``, and the GPU type from the pod's node labels
(``nodeSelector`` or required node affinity ``In`` terms) under ``GPU_LABELS``. A LeaderWorkerSet
runs one engine over a group of ``leaderWorkerTemplate.size`` pods: the leader's engine gets
size x (GPUs per pod), the workers (no engine command of their own) are not separate stacks.
Several serving containers in one file (prefill / decode roles) give one stack each.
Malformed manifests raise OptkgError '<file>:<line>: <field>: ...' (exit 2 in the CLI).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import YamlDoc
from kg.inputs.launch.container import ContainerSpec, add_container_stack

# kind -> path of the pod spec inside the object
POD_SPEC_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": (("spec",),),
    "Deployment": (("spec", "template", "spec"),),
    "StatefulSet": (("spec", "template", "spec"),),
    "DaemonSet": (("spec", "template", "spec"),),
    "ReplicaSet": (("spec", "template", "spec"),),
    "Job": (("spec", "template", "spec"),),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
                        ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")),
}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# node labels that name the GPU model: NVIDIA GPU feature discovery, GKE, Karpenter (AWS), AKS/OpenShift GFD
GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name",
              "nvidia.com/gpu.family", "amd.com/gpu.product-name")
_ROLE_WORDS = ("prefill", "decode")


def is_manifest(doc: YamlDoc) -> bool:
    """A Kubernetes object: a mapping with ``apiVersion`` and ``kind``."""
    return isinstance(doc.data, dict) and "apiVersion" in doc.data and "kind" in doc.data


def _get(d: Any, path: tuple) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _gpu_type(pod: dict[str, Any]) -> str | None:
    labels: dict[str, Any] = dict(pod.get("nodeSelector") or {}) if isinstance(pod.get("nodeSelector"), dict) else {}
    terms = _get(pod, ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    for term in terms if isinstance(terms, list) else []:
        for ex in (term or {}).get("matchExpressions") or [] if isinstance(term, dict) else []:
            if isinstance(ex, dict) and ex.get("operator") == "In" and ex.get("values"):
                labels.setdefault(ex.get("key"), ex["values"][0])
    for key in GPU_LABELS:
        if labels.get(key):
            return str(labels[key])
    return None


def _int_quantity(value: Any, where: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):
        raise OptkgError(f"{where}: expected a whole number of GPUs, found {value!r}")
    n = int(text)
    if n > 4096:
        raise OptkgError(f"{where}: {n} GPUs in one pod is not a real limit (at most 4096)")
    return n


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
        raise OptkgError(f"{where}: expected a list of strings, found {type(value).__name__}")
    return [str(x) for x in value]


def containers(doc: YamlDoc) -> list[ContainerSpec]:
    """The containers of one Kubernetes object (LeaderWorkerSet: leader first, size on the leader's GPU count)."""
    d = doc.data
    kind = d.get("kind")
    name = str(_get(d, ("metadata", "name")) or kind)

    def at(path: tuple) -> str:
        return f"{doc.path}:{doc.where(path)[0]}"

    if kind == "List":
        out = []
        for i, item in enumerate(d.get("items") or []):
            if isinstance(item, dict) and "kind" in item:
                sub = YamlDoc(doc.path, item, {k[2:]: v for k, v in doc.lines.items() if k[:2] == ("items", i)})
                out += containers(sub)
        return out
    paths = POD_SPEC_PATHS.get(str(kind))
    if not paths:
        return []
    group = 1
    if kind == "LeaderWorkerSet":
        size = _get(d, ("spec", "leaderWorkerTemplate", "size"))
        if size is not None:
            group = _int_quantity(size, f"{at(('spec', 'leaderWorkerTemplate', 'size'))}: leaderWorkerTemplate.size")
    out: list[ContainerSpec] = []
    for n, pp in enumerate(paths):
        pod = _get(d, pp)
        if pod is None:
            continue
        if not isinstance(pod, dict):
            raise OptkgError(f"{at(pp)}: {'.'.join(pp)}: expected a mapping (a pod spec)")
        cs = pod.get("containers")
        if cs is None:
            continue
        if not isinstance(cs, list):
            raise OptkgError(f"{at(pp + ('containers',))}: containers: expected a list")
        gpu_type = _gpu_type(pod)
        labels = _get(d, pp[:-1] + ("metadata", "labels")) or {}
        for i, c in enumerate(cs):
            cp = pp + ("containers", i)
            if not isinstance(c, dict):
                raise OptkgError(f"{at(cp)}: containers[{i}]: expected a mapping")
            cname = str(c.get("name") or f"container-{i}")
            image = c.get("image")
            if image is not None and not isinstance(image, str):
                raise OptkgError(f"{at(cp + ('image',))}: image: expected a string")
            command = _strings(c.get("command"), f"{at(cp + ('command',))}: command") if "command" in c else None
            args = _strings(c.get("args"), f"{at(cp + ('args',))}: args")
            env: dict[str, str] = {}
            notes: list[str] = []
            raw_env = c.get("env") or []
            if not isinstance(raw_env, list):
                raise OptkgError(f"{at(cp + ('env',))}: env: expected a list of {{name, value}}")
            for j, e in enumerate(raw_env):
                if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                    raise OptkgError(f"{at(cp + ('env', j))}: env[{j}]: expected {{name: ..., value: ...}}")
                if "value" in e:
                    env[e["name"]] = "" if e["value"] is None else str(e["value"])
                elif "valueFrom" in e:
                    notes.append(f"{at(cp + ('env', j))}: {e['name']} comes from valueFrom (not known here)")
            gpus = None
            for section in ("limits", "requests"):
                res = _get(c, ("resources", section))
                if res is not None and not isinstance(res, dict):
                    raise OptkgError(f"{at(cp + ('resources', section))}: resources.{section}: expected a mapping")
                for key in GPU_RESOURCES:
                    if isinstance(res, dict) and key in res and gpus is None:
                        gpus = _int_quantity(res[key], f"{at(cp + ('resources', section, key))}: resources.{section}[\"{key}\"]")
            roles = [r for r in _ROLE_WORDS if r in f"{name} {cname} {' '.join(map(str, labels.values()) if isinstance(labels, dict) else '')}".lower()]
            spec = ContainerSpec(name=f"{kind}/{name}/{cname}", image=image, entrypoint=command, args=args, env=env,
                                 where=at(cp), path=doc.path, start_line=doc.where(cp)[0], gpu_type=gpu_type,
                                 roles=roles, notes=notes)
            if gpus is not None:
                spec.gpu_count = gpus * (group if n == 0 else 1)
                if group > 1 and n == 0:
                    spec.notes.append(f"{at(cp)}: LeaderWorkerSet group of {group} pods x {gpus} GPUs: "
                                      f"the engine spans {gpus * group} GPUs")
            out.append(spec)
    return out


def stacks_from_manifest(docs: list[YamlDoc], catalog: Any, file_lines: list[str], *,
                         base_dir: Path | None = None, model_override: str | None = None,
                         resolver: Callable[[str], Any] | None = None) -> tuple[list[Any], list[str]]:
    """(one Stack per serving container, notes on the containers that run no known engine)."""
    stacks, skipped = [], []
    for doc in docs:
        if not is_manifest(doc):
            if doc.data is not None:
                raise OptkgError(f"{doc.path}:{doc.where(())[0]}: a document without apiVersion/kind in a Kubernetes manifest")
            continue
        for spec in containers(doc):
            add_container_stack(spec, f"container {spec.name}", stacks, skipped, catalog, file_lines, base_dir=base_dir,
                                model_override=model_override, resolver=resolver)
    return stacks, skipped
