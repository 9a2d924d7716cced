"""kvplan's frozen records: ``@record`` is ``@dataclass(frozen=True)`` whose ``__repr__``, ``__eq__`` and
``__hash__`` are compiled on the class's first use of them instead of at import.

Python 3.11's ``dataclass`` writes each method as source text and compiles it (``dataclasses._create_fn``): about
0.5 ms a class, a third of ``kvplan admit --ctx 1M``'s start-up over the records it loads, most of which it never
prints, compares or hashes. ``__init__`` and the frozen ``__setattr__`` / ``__delattr__`` stay generated at import
(``frozen=True`` as ``dataclasses`` knows it, so a ``@dataclass(frozen=True)`` subclass of a record is allowed).
``__repr__``, ``__eq__`` and ``__hash__`` start as the three shared functions below; the first call on a class
compiles the source ``dataclass`` would have compiled (:func:`_source`) and puts it in their place, so a record
hashed a million times runs the generated code. Each is set only where ``dataclass`` would set it: not over a
method the class body defines; ``__hash__`` also over the ``None`` Python puts in its place when the body defines
``__eq__`` (``dataclass(eq=True, frozen=True)`` does the same). tests/core/test_records.py checks records against
``dataclass`` itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


def _source(name: str, fields: tuple[dataclasses.Field[Any], ...]) -> str:
    """The method's source as Python 3.11's ``dataclasses`` writes it (_repr_fn, _cmp_fn, _hash_fn)."""
    if name == "__repr__":
        shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
        return f'def __repr__(self):\n return self.__class__.__qualname__ + f"({shown})"\n'
    if name == "__eq__":
        names = [f.name for f in fields if f.compare]
        mine, theirs = ("".join(f"{who}.{n}," for n in names) for who in ("self", "other"))
        return (
            f"def __eq__(self, other):\n if other.__class__ is self.__class__:\n  return ({mine})==({theirs})\n"
            " return NotImplemented\n"
        )
    names = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    return f"def __hash__(self):\n return hash(({''.join(f'self.{n},' for n in names)}))\n"


def _compiled(obj: Any, generic: Callable[..., Any], name: str) -> Callable[..., Any]:
    """On a class's first repr, ``==`` or ``hash``: the method ``dataclass`` would have generated (the same
    source, for the class that holds the generic one, with its fields), put in the generic one's place. A record
    that is never printed, compared or hashed never compiles it; one hashed a million times (a plan's layers, in
    ``kvplan fit``) runs the generated code."""
    owner = next(k for k in type(obj).__mro__ if vars(k).get(name) is generic)
    space: dict[str, Any] = {}
    exec(compile(_source(name, dataclasses.fields(owner)), f"<record {owner.__qualname__}>", "exec"), {}, space)
    method: Callable[..., Any] = space[name]
    method.__qualname__ = f"{owner.__qualname__}.{name}"
    if name == "__repr__":
        method = recursive_repr()(method)
    setattr(owner, name, method)
    return method


def _repr(self: Any) -> str:
    text: str = _compiled(self, _repr, "__repr__")(self)
    return text


def _eq(self: Any, other: object) -> object:  # a bool, or NotImplemented
    return _compiled(self, _eq, "__eq__")(self, other)


def _hash(self: Any) -> int:
    value: int = _compiled(self, _hash, "__hash__")(self)
    return value


_repr.__name__, _eq.__name__, _hash.__name__ = "__repr__", "__eq__", "__hash__"


def _build(cls: type[T], kw_only: bool) -> type[T]:
    body = dict(cls.__dict__)
    out = dataclasses.dataclass(frozen=True, repr=False, eq=False, kw_only=kw_only)(cls)
    explicit_hash = body.get("__hash__", dataclasses.MISSING)
    wanted = {
        "__repr__": "__repr__" not in body,
        "__eq__": "__eq__" not in body,
        "__hash__": explicit_hash is dataclasses.MISSING or (explicit_hash is None and "__eq__" in body),
    }
    for name, method in (("__repr__", _repr), ("__eq__", _eq), ("__hash__", _hash)):
        if wanted[name]:
            setattr(out, name, method)
    return out


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, *, kw_only: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """``@record`` or ``@record(kw_only=True)``: a frozen dataclass (see the module's note)."""
    if cls is None:
        return lambda c: _build(c, kw_only)
    return _build(cls, kw_only)
