"""Per-release support data of the serving engines (``catalog/support/*.yaml``) and the facts it feeds.

Some failures depend on what one engine release supports for one model architecture (pipeline
parallelism, allowed LoRA ranks, attention backends that apply logit soft-capping ...). Those facts
are data, read from the released source and cited path:line; this module only loads them and
looks them up. A support file::

    engine: vllm
    description: ...
    facts:                       # the facts this file feeds into the check namespace
      supports_pp: {kind: member, list: pp_architectures, key: architecture}
      allowed_max_lora_ranks: {kind: value}
    releases:
      "0.10.2":
        source: ["vllm/config/lora.py:104 possible_max_ranks"]
        pp_architectures: [LlamaForCausalLM, ...]
        allowed_max_lora_ranks: [8, 16, 32, 64, 128, 256, 320, 512]

``kind: value`` copies the release's value; ``kind: member`` is true when the stack's ``key`` (its
model architecture) is in the release's ``list`` and false when it is not (absent when the stack has
no architecture). A stack on release R gets the entry of the newest listed release <= R (the data
holds until the next listed release changed it); a release older than every listed one gets no
facts (rules reading them do not fire and --explain says the fact is missing); without a release the
newest entry is used and ``support_release`` says which.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.relcmp import Release
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml

FACT_KINDS = ("value", "member")


@dataclass
class SupportFile:
    """One loaded support file: its engine, fact definitions and releases (sorted oldest first)."""

    path: str
    engine: str
    facts: dict[str, dict[str, Any]]
    releases: list[tuple[Release, str, dict[str, Any]]] = field(default_factory=list)

    def entry(self, version: str | None) -> tuple[str, dict[str, Any]] | None:
        """(release, entry) in force at ``version`` (see module doc), or None."""
        if not self.releases:
            return None
        if not version:
            _, name, e = self.releases[-1]
            return name, e
        try:
            v = Release(version)
        except ValueError:  # packaging's InvalidVersion
            return None
        best = None
        for rv, name, e in self.releases:
            if rv <= v:
                best = (name, e)
        return best


def _problem(path: str, msg: str) -> OptkgError:
    return OptkgError(f"{path}: {msg}")


def load_support_file(path: Path | str, data: Any = None) -> SupportFile:
    """Read and check one support file (``data``: its parsed content, when already read). Raises OptkgError
    naming the file and field."""
    d = load_yaml(path).data if data is None else data
    p = str(path)
    if not isinstance(d, dict):
        raise _problem(p, "expected a mapping with engine, facts and releases")
    for key in ("engine", "facts", "releases"):
        if key not in d:
            raise _problem(p, f"missing field '{key}'")
    facts = d["facts"]
    if not isinstance(facts, dict) or not facts:
        raise _problem(p, "facts: expected a mapping of fact name -> {kind, ...}")
    for name, spec in facts.items():
        if not isinstance(spec, dict) or spec.get("kind") not in FACT_KINDS:
            raise _problem(p, f"facts.{name}.kind: expected one of {', '.join(FACT_KINDS)}")
        if spec["kind"] == "member" and not (spec.get("list") and spec.get("key")):
            raise _problem(p, f"facts.{name}: a member fact needs 'list' and 'key'")
    rels = d["releases"]
    if not isinstance(rels, dict) or not rels:
        raise _problem(p, "releases: expected a mapping of release -> entry")
    out = SupportFile(p, str(d["engine"]), facts)
    for name, entry in rels.items():
        try:
            v = Release(str(name))
        except ValueError:  # packaging's InvalidVersion
            raise _problem(p, f"releases.{name}: not a release number") from None
        if not isinstance(entry, dict) or not entry.get("source"):
            raise _problem(p, f"releases.{name}.source: every entry cites the released source (path:line)")
        for fname, spec in facts.items():
            needed = spec["list"] if spec["kind"] == "member" else fname
            if needed in entry and spec["kind"] == "member" and not isinstance(entry[needed], list):
                raise _problem(p, f"releases.{name}.{needed}: expected a list")
        out.releases.append((v, str(name), entry))
    out.releases.sort(key=lambda x: x[0])
    return out


def support_dir() -> Path:
    return paths.catalog_dir() / "support"


@lru_cache(maxsize=8)
def _load_all(folder: str) -> tuple[SupportFile, ...]:
    """Every support file of ``folder``, checked. Their parsed content comes from the optkg cache (kg.core.cache,
    checksummed JSON keyed on every file's name inside the folder and content digest, so a copy of the folder
    elsewhere reads it too; the entry holds no path) when the files are unchanged: they are read on every
    ``optkg check`` and YAML parsing was a large part of its start-up."""
    import hashlib
    from kg.core import cache
    files = sorted(Path(folder).glob("*.yaml"))
    try:
        key = hashlib.sha256("\0".join(f"{cache.rooted(f, folder)}\0{cache.file_digest(f)}" for f in files)
                             .encode()).hexdigest()[:32]
    except OSError:
        key = None
    cpath = cache.cache_file(f"support-{key}.json") if key else None
    got = cache.read_data(cpath, "support", key) if cpath else None
    if isinstance(got, list) and len(got) == len(files):
        return tuple(load_support_file(f, d) for f, d in zip(files, got))
    datas = [load_yaml(f).data for f in files]
    out = tuple(load_support_file(f, d) for f, d in zip(files, datas))  # checked before it is cached
    if cpath:
        cache.write_data(cpath, "support", key, datas)  # False (not cached) for data JSON cannot hold
    return out


def support_files(folder: Path | None = None) -> tuple[SupportFile, ...]:
    """Every support file (cached per folder for the process)."""
    return _load_all(str(folder or support_dir()))


def support_facts(engine: str | None, version: str | None, keys: dict[str, Any],
                  folder: Path | None = None) -> dict[str, Any]:
    """The support facts for a stack on ``engine`` ``version`` with lookup ``keys`` (e.g. {'architecture': ...}).

    Returns fact name -> value, plus ``support_releases``: {file stem: release whose entry was used}.
    """
    out: dict[str, Any] = {}
    used: dict[str, str] = {}
    if not engine:
        return out
    for sf in support_files(folder):
        if sf.engine != engine:
            continue
        got = sf.entry(version)
        if got is None:
            continue
        rel, entry = got
        used[Path(sf.path).stem] = rel
        for name, spec in sf.facts.items():
            if spec["kind"] == "value":
                if name in entry:
                    out[name] = entry[name]
            else:
                key = keys.get(spec["key"])
                if key is not None and spec["list"] in entry:
                    out[name] = key in entry[spec["list"]]
    if used:
        out["support_releases"] = used
    return out
