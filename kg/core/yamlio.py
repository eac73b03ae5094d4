"""Safe YAML loading with line numbers, and atomic file writing.

``load_yaml`` composes the document with PyYAML's C safe loader (pure-Python fallback), refuses
unsafe tags (``!!python/object``), alias bombs (more than ``MAX_NODES`` nodes after expanding
aliases, checked before anything is constructed), files larger than ``MAX_BYTES`` and non-UTF-8
bytes, and returns the data plus a map from field path to (line, column), 1-based.
Every failure is an ``OptkgError`` naming the file and line.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlfast import SHALLOW, fast_parse


class YamlFloat(float):
    """A float read from YAML that remembers the text it was written as (``0.10`` stays "0.10" for a version)."""

    __slots__ = ("text",)

    def __new__(cls, value: float, text: str) -> "YamlFloat":
        self = super().__new__(cls, value)
        self.text = text
        return self

    def __reduce__(self):  # copies and pickles keep the text
        return (YamlFloat, (float(self), self.text))



def _yaml_error(name: str, e: BaseException) -> OptkgError:
    """The one-line error for a YAML document that does not parse: ``file:line:col: YAML error: what``."""
    import yaml  # imported lazily, as in the loaders (kept off the start-up path)

    if isinstance(e, RecursionError):
        return OptkgError(f"{name}: YAML nesting too deep")
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        what = (e.problem or e.context or "invalid YAML").strip()
        if "could not determine a constructor" in str(e):
            what = f"unsafe or unknown tag refused ({what})"
        return OptkgError(f"{where}: YAML error: {what}")
    return OptkgError(f"{name}: YAML error: {str(e).splitlines()[0]}")

def scalar_text(value: Any) -> str:
    """The text a YAML scalar was written as, when the loader kept it (a float), else ``str(value)``."""
    return value.text if isinstance(value, YamlFloat) else str(value)


MAX_INT_DIGITS = 300  # a YAML integer longer than this is refused (Python's int() stops at 4,300)

_loader: type | None = None


def _loader_class() -> type:
    """PyYAML's C safe loader (~10x faster; pure-Python when libyaml is missing) with YAML 1.2 numbers.

    PyYAML resolves plain scalars by YAML 1.1 rules: ``010`` is octal 8, ``9:06:08`` is the base-60
    integer 32768, ``1_000`` is 1000, ``0b11`` is 3. Here numbers follow the YAML 1.2 core schema, less
    its octal and hex forms: decimal integers (``010`` is 10), floats with an optional exponent,
    ``.inf``/``.nan``; anything else (``9:06:08``, ``0o17``, ``0x1f``) stays a string and the field's type
    check names it (no count optkg reads is written in octal or hex: ``tp_size: 0o17`` read as 15 was a
    misread, issue 26 #27).
    Integers over ``MAX_INT_DIGITS`` digits are a YAML error naming the line. Floats keep their text
    (``YamlFloat``). Booleans and nulls are as before. PyYAML is imported on first use, so commands
    that read no YAML (``optkg kv``) start faster.
    """
    global _loader
    if _loader is not None:
        return _loader
    import re

    import yaml
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    int_tag, float_tag = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
    Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag not in (int_tag, float_tag)] for k, v in base.yaml_implicit_resolvers.items()}
    int_rx = re.compile(r"^[-+]?[0-9]+$")
    float_rx = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
    Loader.add_implicit_resolver(int_tag, int_rx, list("-+0123456789"))
    Loader.add_implicit_resolver(float_tag, float_rx, list("-+0123456789."))

    def construct_int(loader, node):
        text = loader.construct_scalar(node)
        digits = text.lstrip("+-")
        if len(digits) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(None, None, f"an integer of {len(digits):,} digits (more than any "
                                                    f"count or size optkg models)", node.start_mark)
        if not re.fullmatch(r"[-+]?[0-9]+", text):  # an explicit !!int tag on something else
            raise yaml.constructor.ConstructorError(None, None, f"{text[:40]!r} is not an integer", node.start_mark)
        return int(text)

    def construct_float(loader, node):
        text = loader.construct_scalar(node)
        try:
            return _yaml_float(text)
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, f"{text[:40]!r} is not a number", node.start_mark) from None

    Loader.add_constructor(int_tag, construct_int)
    Loader.add_constructor(float_tag, construct_float)
    _loader = Loader
    return Loader

MAX_BYTES = 2 * 1024 * 1024  # 2 MiB per YAML file


def _yaml_float(text: str) -> YamlFloat:
    """The float a YAML 1.2 float scalar ``text`` is (``.inf``, ``.nan`` too), keeping its text; ValueError."""
    low = text.lower()
    if low.lstrip("+-") == ".inf":
        return YamlFloat(float("-inf") if low.startswith("-") else float("inf"), text)
    if low == ".nan":
        return YamlFloat(float("nan"), text)
    return YamlFloat(float(text), text)
MAX_NODES = 200_000  # nodes after alias expansion


class YamlDoc:
    """Loaded YAML: ``data`` (plain Python objects), ``lines`` (path tuple -> (line, column), 1-based) and
    ``duplicate_keys`` (keys repeated in one mapping, YAML keeps the last: (key path, line, column, line
    of the first)).

    A document read by the fast path (``kg.core.yamlfast``) knows the lines of its shallow fields only;
    ``lines`` (and ``where`` of a deeper field) composes the kept text once for the full map, the same
    map the exact path builds. Only documents with a problem to report usually need it.
    """

    __slots__ = ("path", "data", "_lines", "duplicate_keys", "_text", "_shallow")

    def __init__(self, path: str, data: Any, lines: dict[tuple, tuple[int, int]] | None = None,
                 duplicate_keys: list[tuple[tuple, int, int, int]] | None = None, *, text: str | None = None,
                 shallow: dict[tuple, tuple[int, int]] | None = None) -> None:
        self.path = path
        self.data = data
        self._lines = lines if lines is not None or text is not None else {}
        self.duplicate_keys = duplicate_keys if duplicate_keys is not None else []
        self._text = text  # for the full line map of a fast-path document, until it is built
        self._shallow = shallow or {}

    @property
    def lines(self) -> dict[tuple, tuple[int, int]]:
        if self._lines is None:
            self._lines = _exact_lines(self._text or "")
            self._text = None
        return self._lines

    def has_lines(self) -> bool:
        """``bool(self.lines)`` (read from text with a node, not made from in-memory data) without building a
        fast-path document's full line map: a stack file's check needs it, not the map."""
        if self._lines is not None:
            return bool(self._lines)
        return self.data is not None or bool(self._shallow)

    @lines.setter
    def lines(self, value: dict[tuple, tuple[int, int]]) -> None:
        self._lines, self._text = value, None

    def renamed(self, path: str, data: Any) -> "YamlDoc":
        """The same document under another name with other (e.g. copied) data; lines still lazy."""
        doc = YamlDoc(path, data, self._lines, self.duplicate_keys, text=self._text, shallow=self._shallow)
        return doc

    def where(self, path: tuple) -> tuple[int, int]:
        """Line and column of the deepest known prefix of ``path`` (1, 1 when unknown)."""
        p = tuple(path)
        lines = self.lines if self._lines is not None or len(p) > SHALLOW else self._shallow
        while p:
            if p in lines:
                return lines[p]
            p = p[:-1]
        return lines.get((), (1, 1))

    def __repr__(self) -> str:
        return f"YamlDoc({self.path!r}, {self.data!r})"


def check_input_file(path: Path | str, what: str = "") -> os.stat_result:
    """The ``stat`` of an input file; OptkgError when it is missing, a folder, or a FIFO or socket.

    A named pipe (``mkfifo``) blocks ``open()`` until someone writes to it, forever in a CI job, so
    it is refused before opening (bounded-work rule). Character devices such as /dev/zero are
    read with the caller's size limit instead.
    """
    import stat
    shown = f"{what}{path}" if what else str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise OptkgError(f"{shown}: file not found") from None
    except OSError as e:
        raise OptkgError(f"{shown}: cannot read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise OptkgError(f"{shown}: is a directory, expected a file")
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a socket"
        raise OptkgError(f"{shown}: is {kind}, not a regular file; optkg reads only files (it would wait forever)")
    return st


def read_text(path: Path | str, max_bytes: int = MAX_BYTES) -> str:
    """Read a UTF-8 text file. Raises OptkgError for missing files, size over ``max_bytes``, bad bytes."""
    p = Path(path)
    size = check_input_file(p).st_size
    if size > max_bytes:
        raise OptkgError(f"{path}: file is {size} bytes, over the limit of {max_bytes} bytes")
    try:  # read at most one byte past the limit: /dev/zero or a pipe reports size 0 but never ends
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as e:
        raise OptkgError(f"{path}: cannot read ({e.strerror})") from None
    if len(raw) > max_bytes:
        raise OptkgError(f"{path}: file is over the limit of {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise OptkgError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None


def _refuse_huge_before_composing(text: str, name: str, limit: int) -> None:
    """OptkgError when ``text`` holds more than ``limit`` nodes, counted from the parser's events before any node
    is composed: composing 950,000 list items first took 10 s and 419 MB (issue 26 #16). A node takes at least
    two characters (``1,``), so a text under ``2 * limit`` characters cannot be over and is not pre-scanned.
    Syntax errors are left to the parse that follows (it names the line)."""
    if len(text) < 2 * limit:
        return
    import yaml
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent, yaml.DocumentEndEvent, yaml.DocumentStartEvent,
            yaml.StreamStartEvent, yaml.StreamEndEvent)
    loader = _loader_class()(text)
    n = 0
    try:
        while loader.check_event():
            ev = loader.get_event()
            if not isinstance(ev, ends):
                n += 1
                if n > limit:
                    raise OptkgError(f"{name}:{ev.start_mark.line + 1}: document has more than {limit:,} nodes; "
                                     f"optkg reads at most {limit:,} per file")
    except yaml.YAMLError:
        return
    finally:
        loader.dispose()


def _count_nodes(node: yaml.Node, limit: int) -> int:
    """Count nodes as they would be after alias expansion; stop early past ``limit``.

    The error says "alias bomb" only when aliases did the expanding; a document that is simply
    that large is called too large.
    """
    import yaml
    total = 0
    memo: dict[int, int] = {}
    aliased = False

    def too_big() -> OptkgError:
        if aliased:
            return OptkgError(f"document expands to more than {limit} nodes through aliases (an alias bomb?)")
        return OptkgError(f"document has more than {limit} nodes; optkg reads at most {limit} per file")

    def visit(n: yaml.Node, depth: int) -> int:
        nonlocal total, aliased
        if depth > 200:
            raise OptkgError("nesting deeper than 200 levels")
        key = id(n)
        if key in memo:  # an alias: counts again as a full copy
            if memo[key] > 1:
                aliased = True
            return memo[key]
        if isinstance(n, yaml.MappingNode):
            c = 1 + sum(visit(k, depth + 1) + visit(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            c = 1 + sum(visit(v, depth + 1) for v in n.value)
        else:
            c = 1
        memo[key] = c
        if c > limit:
            raise too_big()
        return c

    total = visit(node, 0)
    return total


def _line_map(node: yaml.Node, duplicates: list | None = None) -> dict[tuple, tuple[int, int]]:
    """Path -> (line, column); repeated mapping keys are appended to ``duplicates`` (same walk, no re-parse)."""
    import yaml
    out: dict[tuple, tuple[int, int]] = {}
    seen: set[int] = set()

    def walk(n: yaml.Node, path: tuple) -> None:
        out.setdefault(path, (n.start_mark.line + 1, n.start_mark.column + 1))
        if id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            first: dict[str, int] = {}
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                if key in first and duplicates is not None:
                    duplicates.append((path + (key,), k.start_mark.line + 1, k.start_mark.column + 1, first[key]))
                first.setdefault(key, k.start_mark.line + 1)
                out[path + (key,)] = (k.start_mark.line + 1, k.start_mark.column + 1)
                walk(v, path + (key,))
                out[path + (key,)] = (k.start_mark.line + 1, k.start_mark.column + 1)
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, path + (i,))

    walk(node, ())
    return out


def _exact_lines(text: str) -> dict[tuple, tuple[int, int]]:
    """The exact path's line map of a document the fast path already read (so it composes)."""
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    return _line_map(node) if node is not None else {}


# ---------------------------------------------------------------------------------------------
# A user's stack file, read by every `check` of it, through the content-keyed cache (kg.core.cache): a warm
# run neither imports PyYAML (~27 ms: its reader compiles a large regular expression) nor parses

CACHE_MAX_CHARS = 256 * 1024  # stack and launch files; catalogs have their own caches
_DOC_KIND = "yaml-doc"


class _NotPlain(Exception):
    pass


def _encode(x: Any) -> Any:
    """``x`` (data the fast path built) as JSON that keeps every type: {"f": text} a YamlFloat, {"l": [...]} a
    list, {"m": [[key, value], ...]} a mapping (keys of any scalar type, in order). _NotPlain for anything else."""
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is YamlFloat:
        return {"f": x.text}
    if t is list:
        return {"l": [_encode(v) for v in x]}
    if t is dict:
        return {"m": [[_encode(k), _encode(v)] for k, v in x.items()]}
    raise _NotPlain(t.__name__)


def _decode(x: Any) -> Any:
    if type(x) is not dict:
        return x
    if "f" in x:
        return _yaml_float(x["f"])
    if "l" in x:
        return [_decode(v) for v in x["l"]]
    return {_decode(k): _decode(v) for k, v in x["m"]}


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` equal with equal types all the way down (1 is not True, a YamlFloat keeps its text)."""
    if type(a) is not type(b):
        return False
    if type(a) is YamlFloat:
        return a.text == b.text
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(_same(k, l) and _same(v, w) for (k, v), (l, w) in zip(a.items(), b.items()))
    return a == b


def _fast_doc(text: str, name: str, cache: bool) -> YamlDoc | None:
    """The fast path's document of ``text`` (None: the exact path must read it). With ``cache`` (and a text of at
    most ``CACHE_MAX_CHARS``), its data and shallow lines come from and go to a content-keyed cache entry
    (kg.core.cache: private folder, MAC-checked, plain JSON); the full line map is still built from the text
    when a problem needs it."""
    entry = key = None
    if cache and len(text) <= CACHE_MAX_CHARS:
        import hashlib

        from kg.core import cache as kc
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        entry = kc.cache_file(f"yaml-{key[:32]}.json")
        got = kc.read_data(entry, _DOC_KIND, key)
        if got is not None:
            try:
                data, shallow = _decode(got[0]), {tuple(p): (int(ln), int(col)) for p, ln, col in got[1]}
                return YamlDoc(name, data, None, [], text=text, shallow=shallow)
            except (TypeError, ValueError, KeyError, IndexError):
                pass  # not an entry this code wrote: parse again and overwrite it
    fast = fast_parse(text, MAX_NODES, _loader_class())
    if fast is None:
        return None
    if entry is not None:
        from kg.core import cache as kc
        try:
            enc = [_encode(fast[0]), [[list(p), ln, col] for p, (ln, col) in fast[1].items()]]
            if _same(_decode(enc[0]), fast[0]):
                kc.write_data(entry, _DOC_KIND, key, enc)
        except (_NotPlain, ValueError, RecursionError):
            pass
    return YamlDoc(name, fast[0], None, [], text=text, shallow=fast[1])


def parse_yaml(text: str, name: str = "<string>", cache: bool = False) -> YamlDoc:
    """Parse one YAML document from ``text`` safely. Raises OptkgError with ``name:line:col``.

    Most documents take the fast path (``kg.core.yamlfast``: same data, lines on demand; ``cache``: through
    the content-keyed cache, ``_fast_doc``); the rest, and every error, the exact path below."""
    fast = _fast_doc(text, name, cache)
    if fast is not None:
        return fast
    import yaml

    _refuse_huge_before_composing(text, name, MAX_NODES)
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDoc(name, None, {})
        try:
            _count_nodes(node, MAX_NODES)
        except OptkgError as e:
            raise OptkgError(f"{name}:{node.start_mark.line + 1}: {e}") from None
        data = loader.construct_document(node)
    except (yaml.YAMLError, RecursionError) as e:
        raise _yaml_error(name, e) from None
    finally:
        loader.dispose()
    duplicates: list[tuple[tuple, int, int, int]] = []
    lines = _line_map(node, duplicates)
    return YamlDoc(name, data, lines, duplicates)


def load_yaml(path: Path | str, max_bytes: int = MAX_BYTES, cache: bool = False) -> YamlDoc:
    """Read and parse a YAML file (see module doc; ``cache``: see ``parse_yaml``). Raises OptkgError."""
    return parse_yaml(read_text(path, max_bytes), str(path), cache)


_PROTECTED: set[str] = set()


def protect_inputs(paths: list[Path | str]) -> None:
    """Make ``atomic_write`` refuse to replace these files (a command's inputs), even with force.

    Replaces the previous set; ``protect_inputs([])`` clears it. Paths are compared after
    resolving symlinks and ``..``.
    """
    _PROTECTED.clear()
    for p in paths:
        try:
            _PROTECTED.add(os.path.realpath(p))
        except (OSError, ValueError):
            continue


def refuse_if_input(path: Path | str, inputs: list[Path | str] = ()) -> None:
    """OptkgError when ``path`` is one of ``inputs`` or of the protected inputs (``protect_inputs``)."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return
    extra = set()
    for x in inputs:
        try:
            extra.add(os.path.realpath(x))
        except (OSError, ValueError):
            continue
    if real in _PROTECTED or real in extra:
        raise OptkgError(f"{path}: is an input of this command; refusing to overwrite it with the output "
                         "(even with --force): write the output to another file")


def atomic_write(path: Path | str, data: str | bytes, *, force: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + rename).

    With ``force=False`` an existing file is never replaced (OptkgError). Never replaces something
    that is not a regular file (a device such as /dev/full, a FIFO, a socket: OptkgError, even with
    force), nor an input of the running command (``protect_inputs``). A symbolic link (also a
    dangling one) is refused, naming the path it resolves to: writing through it would replace (or
    create) a file elsewhere than the path asked for. Any OSError (permission,
    read-only or pseudo file system, full disk) becomes an OptkgError naming the path. The temp file
    is removed if anything fails, so an interrupted write leaves the old file intact.
    """
    import stat
    p = Path(path)
    refuse_if_input(p)
    if p.is_symlink():
        raise OptkgError(f"{path}: is a symbolic link to {os.path.realpath(p)}; refusing to write through it "
                         "(remove the link or write to the target path)")
    try:
        st = p.stat() if p.exists() else None
    except OSError as e:
        raise OptkgError(f"{path}: cannot write ({e.strerror or e})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OptkgError(f"{path}: is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OptkgError(f"{path}: is not a regular file (a device, pipe or socket); refusing to replace it")
    if st is not None and not force:
        raise OptkgError(f"{path}: exists; refusing to overwrite (pass --force to replace it)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OptkgError(f"{path}: folder {parent} does not exist")
    try:
        _write_replace(p, data, force, str(path))
        return Path(path)
    except OSError as e:
        raise OptkgError(f"{path}: cannot write ({e.strerror or type(e).__name__})") from None


def _write_replace(p: Path, data: str | bytes, force: bool, shown: str) -> Path:
    import tempfile  # here, not at module level: most commands never write a file

    parent = p.parent if str(p.parent) else Path(".")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (or keep the replaced file's)
        try:
            mode = p.stat().st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        if not force:
            # link() fails if the target appeared meanwhile: never clobber.
            try:
                os.link(tmp, p)
            except FileExistsError:
                raise OptkgError(f"{shown}: exists; refusing to overwrite (pass --force to replace it)") from None
            os.unlink(tmp)
        else:
            os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def parse_yaml_all(text: str, name: str = "<string>", cache: bool = False) -> list[YamlDoc]:
    """Parse every document of a multi-document YAML stream (``---`` separated) safely.

    Same refusals as ``parse_yaml`` (unsafe tags, more than ``MAX_NODES`` nodes over all documents
    after alias expansion); line numbers are of the whole file. Empty documents are skipped.
    Raises OptkgError with ``name:line:col``. With ``cache``, a stream of one non-null document the fast
    path reads comes from the content-keyed cache as ``parse_yaml``'s does (same data and lines).
    """
    if cache:
        one = _fast_doc(text, name, cache)
        if one is not None and one.data is not None:  # (None: an empty stream or a null document; exact path)
            return [one]
    import yaml

    _refuse_huge_before_composing(text, name, MAX_NODES)
    loader = _loader_class()(text)
    docs: list[YamlDoc] = []
    budget = MAX_NODES
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            try:
                budget -= _count_nodes(node, budget)
            except OptkgError as e:
                raise OptkgError(f"{name}:{node.start_mark.line + 1}: {e}") from None
            data = loader.construct_document(node)
            duplicates: list[tuple[tuple, int, int, int]] = []
            docs.append(YamlDoc(name, data, _line_map(node, duplicates), duplicates))
    except (yaml.YAMLError, RecursionError) as e:
        raise _yaml_error(name, e) from None
    finally:
        loader.dispose()
    return docs


def load_yaml_all(path: Path | str, max_bytes: int = MAX_BYTES) -> list[YamlDoc]:
    """Read and parse every document of a YAML file (see ``parse_yaml_all``). Raises OptkgError."""
    return parse_yaml_all(read_text(path, max_bytes), str(path))
