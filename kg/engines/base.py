"""The protocol every serving engine package implements, and its default for an unknown or absent engine.

Generic code (``kg.analyses``, ``kg.cli``) asks ``kg.engines.get(name)`` / ``kg.engines.of(stack)`` for an engine
and calls these methods; it never compares engine names. A package ``kg/engines/<name>/`` defines a subclass of
:class:`Engine` as ``ENGINE`` and overrides what its engine does differently; what it does not override is the
behaviour of an engine optkg knows nothing special about (the flag table's parser, the model's
``max_position_embeddings`` as its context limit, vLLM-like memory arithmetic for a given fraction ...). The
engine's data stays in the catalog: ``catalog/engines/<name>.yaml`` (flags, programs, defaults),
``catalog/engines/releases/<name>.yaml`` (releases and per-release defaults), ``catalog/engines/options/``,
``catalog/engines/checks/`` and ``catalog/support/`` (generated and hand-written tables).

The methods follow the data flow of ``optkg check``:

- launch: ``read_launch`` (a detected command, ``kg.inputs.launch.registry.Launch``), ``launch_words``,
  ``parse_command`` (``--vllm`` / ``--sglang``: a command or a bare list of flags), ``file_formats`` (whole files
  an engine reads, e.g. the TensorRT-LLM LLM-API YAML);
- slots filled from other packages' data: ``capability_tables`` (generated from the released wheels) and
  ``speed_backend`` (the speed estimator's backend for a stack, or why it has none).

Each method's docstring says what it returns for an engine that does not override it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class NotEvaluable:
    """Why something cannot be computed for a stack (a reason a user can act on)."""

    reason: str


@dataclass(frozen=True)
class SpeedBackend:
    """The speed estimator's name for an engine release: ``backend`` (aiconfigurator's backend name) and the
    ``release`` of its database the stack's release maps to, with ``basis`` (why that release)."""

    backend: str
    release: str
    basis: str = ""


class Engine:
    """An engine optkg knows nothing special about: the generic behaviour (module doc). Subclasses set ``name``
    (the engine id of stacks and catalog files) and ``title`` (how output names it), and override methods."""

    name = "unknown"
    title = "unknown engine"

    def __repr__(self) -> str:
        return f"<engine {self.name}>"

    # ---- 1. launch ---------------------------------------------------------------------------------------------
    def read_launch(self, launch: Any) -> Any:
        """The Stack of a detected launch of this engine (``kg.inputs.launch.registry.Launch``): the words after
        the program parsed with the engine's flag table (``kg.inputs.launch.argv.parse_words``), then the launch
        context (container release, ``--gpus``, notes)."""
        from kg.inputs.launch.argv import parse_words
        from kg.inputs.launch.registry import apply_context
        from kg.inputs.modelcfg import resolve_model
        st = parse_words(self.launch_words(launch), launch.catalog, self.name, label=launch.label, env=launch.env,
                         launch=launch.prefix, model_override=launch.model_override,
                         resolver=launch.resolver or resolve_model, engine_version=launch.engine_version)
        return apply_context(st, launch)

    def launch_words(self, launch: Any) -> list[str]:
        """The words ``read_launch`` parses: the launch's arguments as given (an engine may expand a ``--config``
        file here)."""
        return list(launch.args)

    def parse_command(self, command: str, catalog: Any, model_override: str | None = None,
                      flag_label: str | None = None, resolver: Callable[[str], Any] | None = None) -> Any:
        """A Stack from a command of this engine or a bare list of its flags (``--vllm`` / ``--sglang`` and
        ``kg.stack_from_command(engine=...)``): ``kg.inputs.launch.argv.parse_with_table``."""
        from kg.inputs.launch.argv import parse_with_table
        from kg.inputs.modelcfg import resolve_model
        return parse_with_table(command, catalog, self.name, model_override, flag_label, resolver or resolve_model)

    def file_formats(self) -> list[Any]:
        """Whole files this engine reads (``kg.inputs.launch.registry.FileFormat``), e.g. an LLM-API YAML: none."""
        return []

    # ---- 8. slots for generated tables and the speed estimator -------------------------------------------------
    def capability_tables(self, release: str | None) -> list[Any]:
        """The capability tables generated from this engine's released wheel that hold at ``release`` (None: the
        latest known), as the checks lane's generator writes them: none for an engine without generated tables."""
        return []

    def speed_backend(self, stack: Any) -> SpeedBackend | NotEvaluable:
        """The speed estimator's backend and database release for ``stack`` on this engine, or why there is none
        (the speed lane maps each engine; an engine without a mapping is not evaluable, never guessed)."""
        return NotEvaluable(f"no speed-estimator backend is mapped for engine '{self.name}'")


UNKNOWN = Engine()
