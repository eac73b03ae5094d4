"""Release scope and evidence of engine facts: which releases a rule, default or flag holds for, and where.

An *engine fact* is a rule whose ``applies_to.engines`` names a serving engine of ``ENGINE_PACKAGES`` (vllm,
sglang, trtllm), or an entry of ``catalog/engines/<engine>.yaml``.
It must say the releases it holds for and carry evidence from the released source:

- ``versions``: a PEP 440 range with a lower bound (``>=``, ``>``, ``==``, ``~=``); an upper bound
  ``<X`` names the release X that changed the behaviour. A rule for several engines may give one
  range per engine: ``versions: {vllm: ">=0.10.2", sglang: ">=0.5.5"}``.
- ``evidence``: a list of items ``{package, release, path, snippet, line?, note?}``: the PyPI
  distribution, a release of it, the file inside its wheel, and a short exact piece of that file
  (a message, a constant, a symbol) where the behaviour lives; ``line`` is where it was found.
  ``optkg evidence`` (kg.analyses.evidence) fetches the wheel and reports each item found, moved or gone.
- ``role: changed`` marks an item that shows the new behaviour at the release named by the upper
  bound (it must lie outside the range); other items (``role: holds``, the default) lie inside it. A range without an upper bound claims the fact
  still holds, so one evidence item must be at the engine's newest pinned release.

``scope_problems`` returns (field, message) pairs; kg.engine.rules and ``optkg validate`` turn them
into file:line errors.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from kg.core.relcmp import in_range, operators

# The newest release of each engine whose wheel the evidence was checked against (``make evidence``).
# The graph helper's release lists (catalog/engines/) name the same releases; this is the fallback.
PINNED_RELEASES: dict[str, str] = {"vllm": "0.34.0", "sglang": "0.5.23", "trtllm": "1.2.1"}
# engine id -> the PyPI distribution its evidence comes from
ENGINE_PACKAGES: dict[str, str] = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}

EVIDENCE_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["package", "release", "path", "snippet"],
    "properties": {
        "package": {"type": "string", "minLength": 1},
        "release": {"type": "string", "minLength": 1},
        "path": {"type": "string", "minLength": 1, "pattern": "^[^/\\\\][^\\\\]*$"},
        "snippet": {"type": "string", "minLength": 3, "maxLength": 300},
        "line": {"type": "integer", "minimum": 1},
        "note": {"type": "string"},
        "role": {"enum": ["holds", "changed"]},
    },
}
EVIDENCE_SCHEMA: dict[str, Any] = {"type": "array", "minItems": 1, "items": EVIDENCE_ITEM_SCHEMA}
VERSIONS_SCHEMA: dict[str, Any] = {"oneOf": [{"type": "string"},
                                             {"type": "object", "additionalProperties": {"type": "string"}}]}

_LOWER = (">=", ">", "==", "~=", "===")
_UPPER = ("<", "<=", "==", "~=", "===")


def spec_for(versions: Any, engine: str | None) -> str | None:
    """The range text that applies to ``engine`` (``versions`` is a string or {engine: range})."""
    if isinstance(versions, Mapping):
        return versions.get(engine) if engine else None
    return versions or None


def bounds(spec: str) -> tuple[bool, bool]:
    """(has lower bound, has upper bound) of a PEP 440 range text; ValueError when it is not one."""
    try:
        ops = operators(spec)
    except ValueError as e:  # packaging's InvalidSpecifier
        raise ValueError(f"'{spec}' is not a version range (e.g. '>=0.6,<0.8')") from e
    return any(o in _LOWER for o in ops), any(o in _UPPER for o in ops)


def contains(spec: str, release: str) -> bool:
    try:
        return in_range(release, spec)
    except ValueError:  # packaging's InvalidSpecifier / InvalidVersion
        return False


def scope_problems(applies_to: Mapping[str, Any] | None, evidence: Iterable[Mapping[str, Any]] | None,
                   pinned: Mapping[str, str] | None = None, unpinned: bool = False) -> list[tuple[str, str]]:
    """What an engine fact lacks: bounds, evidence, evidence outside the range, no check at the newest release.

    ``applies_to``: {engines: [...], versions: str | {engine: str}}; facts without engines need nothing.
    ``unpinned``: the fact says why no released source backs it (a rule's ``evidence_unpinned``); its release
    range is still checked (a lower bound, from the public report it rests on), the evidence items are not.
    Returns [(field, message)], empty when the scope is complete.
    """
    at = applies_to or {}
    # serving engines only (ENGINE_PACKAGES); training frameworks named in applies_to.engines are not checked here
    engines = [str(e) for e in (at.get("engines") or []) if str(e) in ENGINE_PACKAGES]
    if not engines:
        return []
    pinned = pinned or PINNED_RELEASES
    items = [dict(e) for e in (evidence or [])]
    out: list[tuple[str, str]] = []
    versions = at.get("versions")
    if isinstance(versions, Mapping):
        extra = sorted(set(versions) - set(engines))
        if extra:
            out.append(("applies_to.versions", f"ranges for engines not in applies_to.engines: {', '.join(extra)}"))
    if not items and not unpinned:
        out.append(("evidence", "an engine fact needs evidence: [{package, release, path, snippet}] from the released source"))
    for eng in engines:
        spec = spec_for(versions, eng)
        pkg = ENGINE_PACKAGES.get(eng, eng)
        mine = [e for e in items if str(e.get("package", "")).replace("_", "-").lower() == pkg]
        if not spec:
            out.append(("applies_to.versions", f"no release range for {eng}: give a lower bound (the release it "
                                               f"appeared in) and an upper bound if a release changed it"))
            continue
        try:
            lower, upper = bounds(spec)
        except ValueError as e:
            out.append(("applies_to.versions", str(e)))
            continue
        if not lower:
            out.append(("applies_to.versions", f"{eng} range '{spec}' has no lower bound (the first release it holds for)"))
        if unpinned and not items:
            continue
        if items and not mine:
            out.append(("evidence", f"no evidence item from package '{pkg}' for engine {eng}"))
        for e in mine:
            if e.get("role") == "changed":
                if contains(spec, str(e.get("release"))):
                    out.append(("evidence", f"evidence {e.get('release')} ({e.get('path')}) is marked role: changed "
                                            f"but lies inside {eng} {spec}"))
                continue
            if not contains(spec, str(e.get("release"))):
                out.append(("evidence", f"evidence release {e.get('release')} ({e.get('path')}) is outside {eng} {spec}"))
        newest = pinned.get(eng)
        if not upper and newest and mine and not any(
                str(e.get("release")) == newest and e.get("role") != "changed" for e in mine):
            out.append(("evidence", f"{eng} range '{spec}' is open-ended, so it claims the newest release: add an "
                                    f"evidence item at {eng} {newest}, or an upper bound naming the release that changed it"))
    return out
