"""Which launch format a pasted command is: a registry of program patterns -> parser module.

Each launch format registers a :class:`Launcher` (its name, kind, the program word patterns that
start its commands, and its ``parse``): ``docker`` and ``training`` from ``kg.inputs.launch``, every serving
engine from ``kg.engines`` (which is why commands are read through ``kg.engines.launch``). :func:`detect` finds the earliest program in the words
(after ``VAR=value`` assignments and launcher words such as ``env``, ``nohup``, ``uv run``); the
longest pattern at that position wins. A pattern word is matched against the program word as
the tables spell it (basename; ``python3.11`` -> ``python``) and may be a shell-style glob
(``*.py``). Plug-in point for other formats: define ``parse(launch) -> object`` and call ``register``
at import time. Whole files an engine reads (the TensorRT-LLM LLM-API YAML) register a :class:`FileFormat`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Iterable

from kg.core.errors import OptkgError
from kg.inputs.launch.argv import ASSIGN, program_word, tokens


@dataclass
class Launch:
    """One detected launch command, handed to the launcher's ``parse``.

    ``env``: ``VAR=value`` assignments before the program (and docker ``-e``); ``prefix``: other
    words before it (launchers); ``program``: the matched program words; ``args``: the words after
    them. ``base_dir``: where files named by the command are read from (None: the working directory).
    """

    command: str
    env: dict[str, str]
    prefix: list[str]
    program: list[str]
    args: list[str]
    catalog: Any
    base_dir: Path | None = None
    label: str = "--cmd"
    model_override: str | None = None
    resolver: Callable[[str], Any] | None = None
    engine_version: str | None = None
    gpu_count: int | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Launcher:
    """A launch format: ``programs`` are word patterns (or a callable giving them, read late so
    engine tables can supply them); ``parse(launch)`` returns a Stack (serving) or the format's
    own object (training)."""

    name: str
    kind: str
    programs: tuple[tuple[str, ...], ...] | Callable[[], Iterable[Iterable[str]]]
    parse: Callable[[Launch], Any]

    def patterns(self) -> list[tuple[str, ...]]:
        progs = self.programs() if callable(self.programs) else self.programs
        return [tuple(str(w) for w in p) for p in progs]


@dataclass(frozen=True)
class FileFormat:
    """A whole file an engine reads as one stack (``optkg check FILE``), told apart by its content:
    ``name`` is the file kind reported (``trtllm-llm-api``), ``detects(docs)`` says whether the parsed YAML
    documents are one, ``read(doc, catalog, model_override=..., resolver=...)`` returns the Stack."""

    name: str
    detects: Callable[[list[Any]], bool]
    read: Callable[..., Any]


_REGISTRY: dict[str, Launcher] = {}
_FILE_FORMATS: dict[str, FileFormat] = {}


def register_file_format(fmt: FileFormat) -> FileFormat:
    """Add (or replace, by name) a whole-file format (kg.inputs.launch.files tries them after manifests)."""
    _FILE_FORMATS[fmt.name] = fmt
    return fmt


def file_formats() -> list[FileFormat]:
    """Registered whole-file formats, in registration order."""
    return list(_FILE_FORMATS.values())


def register(launcher: Launcher) -> Launcher:
    """Add (or replace, by name) a launcher."""
    _REGISTRY[launcher.name] = launcher
    return launcher


def launchers() -> list[Launcher]:
    """Registered launchers, in registration order."""
    return list(_REGISTRY.values())


def _matches(pattern: tuple[str, ...], words: list[str]) -> bool:
    if len(words) < len(pattern):
        return False
    return all(fnmatchcase(program_word(w), program_word(p)) or fnmatchcase(w, p) for p, w in zip(pattern, words))


def match_program(words: list[str]) -> tuple[Launcher, int, int] | None:
    """(launcher, start, end) of the earliest registered program in ``words``; None when there is none."""
    pats = [(len(p), p, lz) for lz in launchers() for p in lz.patterns()]
    pats.sort(key=lambda x: -x[0])
    for i in range(len(words)):
        if ASSIGN.fullmatch(words[i]):
            continue
        for n, p, lz in pats:
            if _matches(p, words[i:]):
                return lz, i, i + n
    return None


def program_list() -> str:
    """The registered programs, for error messages."""
    return "; ".join(" ".join(p) for lz in launchers() for p in lz.patterns()[:2])


def detect(command: str | list[str], catalog: Any, **kw: Any) -> tuple[Launcher, Launch]:
    """The launcher for ``command`` and the Launch handed to it; OptkgError naming the known programs."""
    words = tokens(command) if isinstance(command, str) else list(command)
    label = kw.get("label", "--cmd")
    if not words:
        raise OptkgError(f"{label}: empty command")
    m = match_program(words)
    if m is None:
        raise OptkgError(f"{label}: no known launch program in the command (known: {program_list()}); "
                         "for a bare list of engine flags use --vllm or --sglang")
    lz, a, b = m
    prefix = words[:a]
    env = dict(w.split("=", 1) for w in prefix if ASSIGN.fullmatch(w))
    launch = Launch(command=" ".join(words) if not isinstance(command, str) else command, env=env,
                    prefix=[w for w in prefix if not ASSIGN.fullmatch(w)], program=words[a:b], args=words[b:],
                    catalog=catalog, **kw)
    return lz, launch


def parse_launch(command: str | list[str], catalog: Any, **kw: Any) -> Any:
    """Detect the launch format of ``command`` and parse it (see ``Launch`` for the keywords)."""
    lz, launch = detect(command, catalog, **kw)
    return lz.parse(launch)


def apply_context(st: Any, launch: Launch) -> Any:
    """Carry what the launch context knows (container image version, ``--gpus`` count, notes) onto a Stack."""
    if launch.engine_version and not getattr(st, "engine_version", None):
        st.engine_version = launch.engine_version
    if launch.gpu_count is not None and getattr(st, "gpu_count", None) is None:
        st.gpu_count = launch.gpu_count
    st.notes[:0] = launch.notes
    from kg.inputs.lora_adapters import apply_adapters  # LoRA adapters' adapter_config.json, read beside the command
    apply_adapters(st, getattr(st, "engine", None), launch.base_dir)
    return st


def resolve_file(name: str, launch: Launch) -> Path:
    """A file named by the command, relative to the launch's working directory unless absolute."""
    p = Path(name).expanduser()
    return p if p.is_absolute() or launch.base_dir is None else launch.base_dir / p


def finding_location(finding: dict[str, Any], origins: dict[str, str]) -> str | None:
    """The file:line of the flag or key behind a finding: its techniques first, then the settings it
    names in ``facts``/``numbers``, then where the stack's container sits; None for pasted commands."""
    keys = list(finding.get("techniques") or []) + list(finding.get("facts") or {}) + list(finding.get("numbers") or {})
    for k in [*keys, "@stack"]:
        v = origins.get(k)
        if v and ":" in v and v.rsplit(":", 1)[1].isdigit():
            return v
    return None
