"""The fast path of ``kg.core.yamlio.parse_yaml``: plain data straight from libyaml's events.

``yamlio``'s exact path composes a node tree (libyaml in C, PyYAML's resolver called from C for every
scalar), constructs the data from it in Python, counts the nodes again for the alias-bomb limit and
walks the tree once more for the line of every field: ~1 ms for a 240-node technique file. Most
files use none of what makes that necessary, so this module reads the same libyaml event stream once
and builds the data directly (~0.35 ms), counting nodes and keeping the lines of the shallow fields
(depth <= ``SHALLOW``) on the way. Scalars are resolved with the exact path's own resolver table
and constructors (the loader class ``yamlio`` passes in), so a document it accepts gives the same data.

It gives up (``None``: the caller takes the exact path, which also words every error) on anything
it does not build itself: a syntax error, an anchor or alias, an explicit tag, a merge key (``<<``),
a collection as a mapping key, a repeated key, more than one document, nesting deeper than
``MAX_DEPTH``, more than the node limit, a constructor error. The full line map of a document it
built is the exact path's, computed on first use (``yamlio.YamlDoc.lines``).
"""
from __future__ import annotations

from typing import Any, Callable

SHALLOW = 2  # fields at most this deep get their line on the fast path (rules' ("rules", i), ("id",) ...)
MAX_DEPTH = 200  # as yamlio._count_nodes

_STR = "tag:yaml.org,2002:str"
_GIVE_UP_TAGS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")


class _GiveUp(Exception):
    pass


_build: Callable[[str, int], tuple[Any, dict[tuple, tuple[int, int]]]] | None = None


def _make(loader_cls: type) -> Callable[[str, int], tuple[Any, dict[tuple, tuple[int, int]]]] | None:
    import yaml
    try:
        from yaml._yaml import CParser  # libyaml; without it the exact path is the only path
    except ImportError:
        return None
    from yaml.events import (MappingEndEvent, MappingStartEvent, ScalarEvent, SequenceEndEvent,
                             SequenceStartEvent, StreamEndEvent)

    resolvers = loader_cls.yaml_implicit_resolvers
    wildcard = list(resolvers.get(None, []))
    # Resolver.resolve's candidates by first character ('' for the empty scalar); most text has none
    by_first = {k: tuple(v) + tuple(wildcard) for k, v in resolvers.items() if k is not None}
    no_resolver = tuple(wildcard)
    constructors = loader_cls.yaml_constructors
    scalar_node = yaml.ScalarNode
    dummy = loader_cls("")  # the scalar constructors read only the node (construct_scalar), never the stream
    yaml_error = yaml.YAMLError

    def resolve(ev: Any, v: str, candidates: tuple) -> Any:
        """The exact path's value of a plain scalar with candidate resolvers: Resolver.resolve, then the
        tag's constructor."""
        for tag, rx in candidates:
            if rx.match(v):
                if tag == _STR:
                    return v
                if tag in _GIVE_UP_TAGS or tag not in constructors:
                    raise _GiveUp
                return constructors[tag](dummy, scalar_node(tag, v, ev.start_mark, ev.end_mark))
        return v

    def build(text: str, max_nodes: int) -> tuple[Any, dict[tuple, tuple[int, int]]]:
        parser = CParser(text)
        try:
            get = parser.get_event
            get()  # StreamStartEvent
            if type(get()) is StreamEndEvent:  # empty stream (else DocumentStartEvent)
                return None, {}
            shallow: dict[tuple, tuple[int, int]] = {}
            stack: list[Any] = []  # open collections
            paths: list[tuple] = []  # their paths, while at most SHALLOW deep
            keys: list[Any] = []  # per open collection: a mapping's key waiting for its value, else NOKEY
            texts: list[str] = []  # that key as written (the line map's paths hold the text: `yes` not True)
            nokey = keys  # a sentinel no key can equal
            root: Any = None
            n = 0
            while True:
                ev = get()
                t = type(ev)
                if t is ScalarEvent:
                    if ev.anchor is not None or ev.tag is not None:
                        raise _GiveUp
                    val = ev.value
                    if ev.implicit[0]:  # plain: resolved as the exact path does (quoted and block: text)
                        candidates = by_first.get(val[:1], no_resolver)
                        if candidates:
                            val = resolve(ev, val, candidates)
                    opened = False
                elif t is MappingStartEvent or t is SequenceStartEvent:
                    if ev.anchor is not None or ev.tag is not None:
                        raise _GiveUp
                    val = {} if t is MappingStartEvent else []
                    opened = True
                elif t is MappingEndEvent or t is SequenceEndEvent:
                    stack.pop()
                    keys.pop()
                    texts.pop()
                    if len(paths) > len(stack):
                        paths.pop()
                    if not stack:
                        break
                    continue
                else:  # an alias, or anything this path does not build
                    raise _GiveUp
                n += 1
                if n > max_nodes:
                    raise _GiveUp
                depth = len(stack)
                path: tuple = ()
                if depth:
                    top = stack[-1]
                    if type(top) is list:
                        if depth <= SHALLOW:
                            path = paths[-1] + (len(top),)
                            shallow[path] = (ev.start_mark.line + 1, ev.start_mark.column + 1)
                        top.append(val)
                    elif keys[-1] is nokey:  # a key
                        if opened or val in top:  # a collection as a key, or a repeated key
                            raise _GiveUp
                        keys[-1] = val
                        texts[-1] = ev.value
                        if depth <= SHALLOW:
                            shallow[paths[-1] + (ev.value,)] = (ev.start_mark.line + 1, ev.start_mark.column + 1)
                        continue
                    else:  # its value (the line map gives a field the line of its key)
                        if opened and depth < SHALLOW:
                            path = paths[-1] + (texts[-1],)
                        top[keys[-1]] = val
                        keys[-1] = nokey
                else:
                    root = val
                    shallow[()] = (ev.start_mark.line + 1, ev.start_mark.column + 1)
                if opened:
                    stack.append(val)
                    keys.append(nokey)
                    texts.append("")
                    if depth < SHALLOW:
                        paths.append(path)
                    if len(stack) > MAX_DEPTH:
                        raise _GiveUp
                elif not depth:
                    break
            get()  # DocumentEndEvent
            if type(get()) is not StreamEndEvent:
                raise _GiveUp  # more than one document: the exact path says so
            return root, shallow
        except yaml_error:
            raise _GiveUp from None
        finally:
            parser.dispose()

    return build


def fast_parse(text: str, max_nodes: int, loader_cls: type) -> tuple[Any, dict[tuple, tuple[int, int]]] | None:
    """(data, lines of the fields at most ``SHALLOW`` deep) of the one YAML document in ``text``, or None
    when the exact path must read it (see the module doc). ``loader_cls`` is the exact path's loader
    (``yamlio._loader_class()``): its resolvers and constructors give every scalar its value."""
    global _build
    if _build is None:
        _build = _make(loader_cls) or _no_libyaml
    try:
        return _build(text, max_nodes)
    except _GiveUp:
        return None


def _no_libyaml(text: str, max_nodes: int) -> tuple[Any, dict[tuple, tuple[int, int]]]:
    raise _GiveUp
