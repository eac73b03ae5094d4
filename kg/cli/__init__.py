"""Command-line entry point: ``optkg <command> ...``.

A thin layer over the Python API (kg/__init__.py). Each command lives in ``kg/cli/<name>.py`` with
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their command
runs, so ``optkg kv`` does not pay for graphviz or durable-rules.
Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage or input error.
A user mistake prints one line ``optkg: error: ...`` and never a traceback.
"""
from __future__ import annotations

import argparse
import importlib.util
import importlib
import os
import re
import sys
import types

from kg.core import classcode
from kg.core.deferred import defer


def _ismethod(obj: object) -> bool:
    """``inspect.ismethod``, the one function of ``inspect`` that durable-rules calls (for each action it registers)."""
    return isinstance(obj, types.MethodType)


defer("inspect", ismethod=_ismethod)  # read by dataclasses for a class without a docstring only: kg.core.deferred
classcode.install()  # kg's dataclass methods from kept code objects, not compiled from text each run

# command name -> (module, one-line help). The module is imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("kg.cli.check", "check a serving or training stack (file, --cmd, --train, --vllm or --sglang) for coupling findings"),
    "kv": ("kg.cli.kv", "KV-cache derivations for a model under TP/PP/DCP"),
    "models": ("kg.cli.models", "list the bundled model configs (hub id, shape, context limit, source)"),
    "reconcile": ("kg.cli.reconcile", "optkg's memory estimate beside each number of a vLLM/SGLang startup log"),
    "sweep": ("kg.cli.sweep", "evaluate many TP/DCP/KV-dtype combinations in one process"),
    "validate": ("kg.cli.validate", "validate catalog files (all problems in one pass)"),
    "new": ("kg.cli.new", "write a commented template for a new technique"),
    "place": ("kg.cli.place", "placement verdict for a technique file: cells, neighbours, new direction"),
    "explain": ("kg.cli.explain", "coupling paths from one technique to another (or its neighbourhood)"),
    "matrix": ("kg.cli.matrix", "technique x technique compatibility matrix"),
    "gaps": ("kg.cli.gaps", "empty stage x layer x dimension cells, ranked as new directions"),
    "export": ("kg.cli.export", "diagrams: coordinate maps, coupling graph, matrix, stack"),
    "diagnose": ("kg.cli.diagnose", "which wall: memory, compute, bandwidth or none, from metrics"),
    "fit": ("kg.cli.fit", "context fit of techniques to a request trace"),
    "docs": ("kg.cli.docs", "regenerate the technique and rule reference (docs/)"),
    "schema": ("kg.cli.schema", "write catalog/schema/technique.schema.json from the axes"),
    "evidence": ("kg.cli.evidence", "check engine evidence against the released wheels: found, moved or gone"),
}


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, read the same way (COLUMNS, else the terminal of stdout, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter at the width argparse would pick, without importing shutil (with bz2, lzma and zlib)
    for it: every add_argument builds a formatter, so every command paid for it (~6 M instructions, issue 31)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    last_error: str | None = None  # the message of the last usage error (for the --format json error object)

    def __init__(self, *args, **kwargs) -> None:
        # no silent prefixes: `optkg kv --gpu H200` must not be read as --gpu-compute-capability
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse, but an unknown option names the closest option of the command it was given to."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            from kg.cli.didyoumean import unrecognized
            message, target = unrecognized(extras, self, getattr(ns, "command", None))
            target.error(message)
        return ns

    def error(self, message: str) -> None:
        """One line on stderr, exit 2: ``optkg: error: <message> (see 'optkg <command> --help')``.
        A mistyped command or choice gets the closest valid one (kg.cli.didyoumean)."""
        from kg.cli.didyoumean import invalid_choice
        text = invalid_choice(" ".join(str(message).split()))
        _Parser.last_error = f"{text} (see '{self.prog} --help')"
        from kg.core.textsafe import say
        say(f"optkg: error: {_Parser.last_error}")
        raise SystemExit(2)


ERROR_SCHEMA_VERSION = "1.0"


def _json_requested(argv: list[str], args: argparse.Namespace | None, command: str | None) -> bool:
    """``--format json`` was asked for and the report would have gone to stdout (no ``-o FILE``; export
    writes to a file unless ``-o -``), from the parsed arguments, else from argv when parsing failed."""
    if args is not None:
        fmt, out = getattr(args, "format", None), getattr(args, "output", None)
    else:
        fmt = out = None
        for i, a in enumerate(argv):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if a == "--format":
                fmt = nxt
            elif a.startswith("--format="):
                fmt = a.split("=", 1)[1]
            elif a in ("-o", "--output"):
                out = nxt
            elif a.startswith("--output="):
                out = a.split("=", 1)[1]
    if fmt != "json":
        return False
    if command == "export":
        return out is not None and str(out) == "-"
    return out is None or str(out) == "-"


def _json_error(command: str | None, message: str, details: list[str] | None = None) -> None:
    """The error as a JSON object on stdout (``--format json``), beside the one-line stderr message:
    ``{"schema_version", "kind": "error", "command", "message", "details", "exit_code": 2}``.
    A consumer that parses stdout gets an object it can read instead of empty output."""
    from kg.output.report import to_json
    first, *rest = str(message).split("\n")
    rest = list(details or []) + rest
    try:
        sys.stdout.write(to_json({"schema_version": ERROR_SCHEMA_VERSION, "kind": "error", "command": command,
                                  "message": first, "details": [r.strip() for r in rest if r.strip()], "exit_code": 2}))
        sys.stdout.flush()
    except (OSError, ValueError):  # stdout closed or full: the stderr line is the report
        return


def _finite_floats(p: argparse.ArgumentParser) -> None:
    """Every ``type=float`` option reads a finite ASCII number, every ``type=int`` one ASCII digits."""
    from kg.cli.common import ascii_int, finite_float
    for action in p._actions:  # argparse keeps no public list of a parser's actions
        if action.type is float:
            action.type = finite_float
        elif action.type is int:
            action.type = ascii_int


def _available() -> dict[str, tuple[str, str]]:
    out = {}
    for name, (mod, help_) in COMMANDS.items():
        if importlib.util.find_spec(mod) is not None:
            out[name] = (mod, help_)
    return out


_RST_ROLE = r":[a-z]+(?::[a-z]+)?:`~?([^`<]+?)(?:\s*<[^>]*>)?`"


def plain_description(doc: str | None, fallback: str) -> str:
    """A command module's docstring as ``--help`` shows it: the first paragraph, lines joined (argparse wraps it
    again), in plain text: RST roles (``:class:`X` ``) and literals (````x````) lose their markup."""
    text = " ".join((doc or "").strip().split("\n\n", 1)[0].split()) or fallback
    if "`" not in text:  # no role or literal: nothing to compile (every ``optkg`` run builds one description)
        return text
    return re.sub(_RST_ROLE, r"\1", text).replace("``", "")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``optkg`` parser; with ``only`` (the command on the line) just that command's sub-parser is built:
    each argparse parser costs ~2 ms of start-up (gettext lookups), and ``optkg kv`` is benchmarked."""
    p = _Parser(prog="optkg", description="Where a technique sits, what it costs, which techniques collide.")
    p.add_argument("--version", action="version", version="optkg 0.1.0")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (mod, help_) in (_available() if not only else {only: COMMANDS[only]}).items():
        module = importlib.import_module(mod)
        sp = sub.add_parser(name, help=help_, description=plain_description(module.__doc__, help_))
        module.add_arguments(sp)
        _finite_floats(sp)
        sp.set_defaults(_run=module.run)
    return p


class _ClosedStdout:
    """Stands in for a closed standard output (``optkg check ... >&-``): any write fails like a closed fd."""

    encoding = "utf-8"

    def write(self, s: str) -> int:
        raise OSError(9, "standard output is closed")

    def flush(self) -> None:
        return None


def _console_safe(stream):
    """``stream`` with unencodable characters written as escapes (an ASCII or cp1252 console, emoji in
    ``optkg matrix``) and every control character from the input escaped (kg.core.textsafe)."""
    from kg.core.textsafe import TerminalWriter
    if stream is None:
        return _ClosedStdout()
    try:
        stream.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError, OSError):  # not a text file stream (StringIO in tests, a detached stream)
        pass
    return TerminalWriter(stream)


# A one-shot ``optkg`` process (the console script, ``python -m kg.cli``) allocates ~90,000 containers and keeps nearly
# all of them (imports, cached tables, the report): CPython's cyclic collector would rescan that growing heap ~130
# times (one full pass), and at exit it tears every module and object down one by one. Together ~12 % of a warm
# ``optkg check`` (callgrind: 1,243 -> 1,098 M instructions), none of it changing the output.
GC_YOUNG = 100_000  # first-generation threshold while a command runs (CPython's default: 700)
_EXIT_CODE: list[int] = []  # the finished command's exit code, for _exit_now


def _exit_now() -> None:
    """At interpreter exit, after every exit handler registered since main() started (atexit runs them last in, first
    out): flush the standard streams and end the process with the command's exit code, without tearing the heap
    down. A stream that cannot be flushed leaves the exit to the interpreter, which reports it as before."""
    if not _EXIT_CODE:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - the interpreter's own shutdown reports it (exit status 120)
        return
    os._exit(_EXIT_CODE[0])


def main(argv: list[str] | None = None) -> int:
    """Run ``optkg`` with ``argv`` (default: the command line) and return its exit code (module doc)."""
    import gc

    one_shot = argv is None
    if one_shot:
        import atexit
        # only when nothing registered an exit handler before (coverage, an embedding program): those would run after
        # ours, and be skipped
        one_shot = atexit._ncallbacks() == 0
        if one_shot:
            atexit.register(_exit_now)
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], GC_YOUNG), *threshold[1:])
    try:
        rc = _main(argv)
    finally:
        classcode.save()
        kept = sys.modules.get("kg.core.cache")
        if kept is not None:  # the file digests that keyed this run's cache entries (kg.core.cache.file_digest)
            kept.save_digests()
        if not one_shot:  # back to the caller's threshold (a one-shot process ends here: restoring it would only
            gc.set_threshold(*threshold)  # make the next allocation scan the ~80,000 objects made since)
    if one_shot:
        _EXIT_CODE[:] = [rc]
    return rc


def _main(argv: list[str] | None) -> int:
    import importlib.util  # noqa: F401 - used by _available

    from kg.core.errors import OptkgError

    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    only = first if first in COMMANDS else None
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _console_safe(real_out), _console_safe(real_err)
    args = None
    _Parser.last_error = None
    try:
        try:
            parser = build_parser(only)
            args = parser.parse_args(argv)
            if not getattr(args, "_run", None):
                parser.print_help()
                return 2
            if getattr(args, "format", None) == "github":  # the one output made of workflow commands
                sys.stdout.workflow_commands = True
            from kg.cli.common import register_inputs
            register_inputs(args)  # the command's input files are never overwritten by its outputs
            rc = int(args._run(args) or 0)
            sys.stdout.flush()  # a full device or closed pipe fails here, inside the handlers below
            return rc
        except OptkgError as e:
            from kg.core.textsafe import say
            say(f"optkg: error: {e}")
            if _json_requested(argv, args, only):
                _json_error(only, str(e), e.details)
            return 2
        except KeyboardInterrupt:
            sys.stderr.write("optkg: interrupted\n")
            return 130
        except BrokenPipeError:
            _silence_stdout(real_out)
            return 0
        except SystemExit as e:
            if e.code == 2 and _Parser.last_error and _json_requested(argv, args, only):
                _json_error(only, _Parser.last_error)
            return int(e.code or 0) if isinstance(e.code, int) else 2
        except OSError as e:  # writing the output failed (stdout on a full disk, closed): not a bug
            _silence_stdout(real_out)
            what = e.filename or "standard output"
            from kg.core.textsafe import say
            say(f"optkg: error: {what}: cannot write ({e.strerror or e})")
            return 2
        except Exception as e:  # a bug in optkg, not a user mistake
            if os.environ.get("OPTKG_DEBUG"):
                raise
            from kg.core.textsafe import say
            say(f"optkg: internal error: {type(e).__name__}: {e} (set OPTKG_DEBUG=1 for a traceback; please report it)")
            return 3
        finally:
            from kg.core.yamlio import protect_inputs
            protect_inputs([])  # forget this command's inputs (main may run again in the same process)
    finally:
        sys.stdout, sys.stderr = real_out, real_err


def _silence_stdout(real_out) -> None:
    """After a failed write, drop what is still buffered so the exit-time flush does not fail again."""
    try:
        if real_out is not None and hasattr(real_out, "fileno"):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, real_out.fileno())
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # best effort: the error line on stderr is already written
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
