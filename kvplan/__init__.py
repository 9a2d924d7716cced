"""kvplan: KV-cache capacity planning for LLM serving on SGLang and vLLM.

The package's own code is the command's Ctrl-C handler, installed here, before anything heavy is imported
(stdlib only). A SIGINT while a file is being replaced (``kvplan.fsio.writing()``) unwinds, so the temporary file
is removed and the CLI's boundary says "interrupted", exit 130; a second one is ignored while that cleanup runs. At
any other moment nothing is half-written, so the process says "kvplan: interrupted" and exits 130 at once, whatever
it was importing: a KeyboardInterrupt raised inside import frames printed a traceback in 12 of 150 tries.

Then ``@record``, the frozen dataclass of every kvplan record (after the handler: ``dataclasses`` imports
``inspect``), whose ``__repr__``, ``__eq__`` and ``__hash__`` are compiled on a class's first use of them, not at
import: Python 3.11's ``dataclass`` writes and compiles each method per class (about 0.5 ms a class, a third of
``kvplan admit --ctx 1M``'s start-up), for records most of which are never printed, compared or hashed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Any

__version__ = "0.1.0"
DIST = "kvplan-llm"
"""The distribution name on the package index (`pip install kvplan-llm`); the command and import stay `kvplan`.
It was kvplan-dsa, which read as "DSA only" for a tool that plans every attention family."""

EXIT_INTERRUPTED = 130  # kvplan.errors.EXIT_INTERRUPTED (not imported: this runs before it may be)
_pid = os.getpid()
"""The command's own process: a forked worker (simulate --jobs) exits without a line of its own."""


def on_sigint(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    writing = getattr(sys.modules.get("kvplan.fsio"), "writing", None)  # None while fsio itself imports
    if writing is not None and writing():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt
    if os.getpid() == _pid:
        with contextlib.suppress(OSError):
            os.write(2, b"kvplan: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def install_interrupt() -> Any:
    """Install the handler; the previous one (None off the main thread, where signals cannot be set)."""
    try:
        return signal.signal(signal.SIGINT, on_sigint)
    except ValueError:
        return None


def is_the_command() -> bool:
    """This process is `kvplan` itself (the console script, or `python -m kvplan`), not a program importing it."""
    if os.path.basename(sys.argv[0]) in ("kvplan", "kvplan.exe"):
        return True
    # `python -m kvplan`: argv[0] is "-m" while runpy imports the package, and the interpreter was given it
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[0] == "-m" and "kvplan" in argv and argv[argv.index("kvplan") - 1] == "-m"


if is_the_command():
    install_interrupt()


# --------------------------------------------------------------------------- records
# ``__init__`` and the frozen ``__setattr__`` / ``__delattr__`` stay generated at import (``frozen=True`` as
# ``dataclasses`` knows it, so a ``@dataclass(frozen=True)`` subclass of a record is allowed). ``__repr__``, ``__eq__``
# and ``__hash__`` start as the three shared functions below; the first call on a class compiles the source
# ``dataclass`` would have compiled (_source) and puts it in their place, so a record hashed a million times runs the
# generated code. Each is set only where ``dataclass`` would set it: not over a method the class body defines;
# ``__hash__`` also over the ``None`` Python puts in its place when the body defines ``__eq__``.
# tests/core/test_records.py checks records against ``dataclass`` itself.

import dataclasses  # noqa: E402 (after the handler is installed)
from collections.abc import Callable  # noqa: E402 (after the handler is installed)
from reprlib import recursive_repr  # noqa: E402 (after the handler is installed)
from typing import TypeVar, dataclass_transform, overload  # noqa: E402 (after the handler is installed)

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
    """``@record`` or ``@record(kw_only=True)``: a frozen dataclass (the package's note)."""
    if cls is None:
        return lambda c: _build(c, kw_only)
    return _build(cls, kw_only)
