"""kvplan: KV-cache capacity planning for LLM serving on SGLang and vLLM.

The package's own code is the command's Ctrl-C handler, installed here, before anything heavy is imported
(stdlib only). A SIGINT while a file is being replaced (``kvplan.fsio.writing()``) unwinds, so the temporary file
is removed and the CLI's boundary says "interrupted", exit 130; a second one is ignored while that cleanup runs. At
any other moment nothing is half-written, so the process says "kvplan: interrupted" and exits 130 at once, whatever
it was importing: a KeyboardInterrupt raised inside import frames printed a traceback in 12 of 150 tries.

Then ``@record``, the frozen dataclass of every kvplan record (after the handler: ``dataclasses`` imports
``inspect``), whose ``__repr__``, ``__eq__`` and ``__hash__`` are compiled on a class's first use of them, not at
import, whose ``__init__`` is compiled once the class has been built ``COMPILE_AFTER`` times (a shared one binds the
first), and whose frozen ``__setattr__`` / ``__delattr__`` are shared: Python 3.11's ``dataclass`` writes and
compiles each method per class (about 0.4 ms a class, a sixth of ``kvplan admit --ctx 1M``'s start-up), for
records most of which are never built, printed, compared or hashed on one command's path, or built a few times.
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
# A record is ``dataclass(frozen=True)`` as ``dataclasses`` knows it (fields, ``__dataclass_params__`` frozen, so a
# ``@dataclass(frozen=True)`` subclass is allowed), but Python 3.11's ``dataclass`` writes and compiles six methods
# per class at import, and builds a docstring with ``inspect.signature``. Here ``dataclass`` only collects the fields
# (init, repr, eq and frozen off, a placeholder docstring); ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__``
# start as the shared functions below: the first call on a class (for ``__init__``, the first past COMPILE_AFTER, or
# inspect.signature) compiles the source ``dataclass`` would have compiled (_source) and puts it in their place, so a
# record built or hashed a million times runs the generated code. The
# frozen ``__setattr__`` / ``__delattr__`` are two shared functions (they only raise, or pass to the parent), and the
# docstring is written from the fields (_doc). Each method is set only where ``dataclass`` would set it: not over one
# the class body defines; ``__hash__`` also over the ``None`` Python puts in its place when the body defines
# ``__eq__``. A record with an InitVar pseudo-field, or a parent that is another kind of dataclass, is
# built by ``dataclass`` itself (frozen, with the lazy repr, == and hash: no such record is on admit's path).
# tests/core/test_records.py checks records against ``dataclass`` itself.

import dataclasses  # noqa: E402 (after the handler is installed)
import inspect  # noqa: E402 (after the handler is installed; dataclasses imports it)
from collections.abc import Callable  # noqa: E402 (after the handler is installed)
from reprlib import recursive_repr  # noqa: E402 (after the handler is installed)
from typing import TypeVar, overload  # noqa: E402 (after the handler is installed)

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # requires-python >= 3.10
    from typing_extensions import dataclass_transform

_LAZY = sys.version_info[:2] == (3, 11)
"""The lazy methods write the sources Python 3.11's ``dataclasses`` writes and set its ``__dataclass_params__``:
on any other Python a record is a plain ``dataclass(frozen=True)``."""

T = TypeVar("T")
_MISSING = dataclasses.MISSING


class _Factory:
    """The marker of a default_factory argument left out (``dataclasses._HAS_DEFAULT_FACTORY``, repr included)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init_source(fields: list[dataclasses.Field[Any]], names: dict[str, Any], has_post_init: bool) -> str:
    """``__init__`` as Python 3.11's ``dataclasses._init_fn`` writes it for a frozen class (every field is a regular
    one here); ``names`` receives the defaults, factories and annotations it refers to."""
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    params: list[str] = []
    kw_params: list[str] = []
    body: list[str] = []
    for f in fields:
        names[f"_type_{f.name}"] = f.type
        value = f.name
        if f.default_factory is not _MISSING:
            names[f"_dflt_{f.name}"] = f.default_factory
            value = (
                f"_dflt_{f.name}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}" if f.init else f"_dflt_{f.name}()"
            )
        elif f.default is not _MISSING and f.init:
            names[f"_dflt_{f.name}"] = f.default
        elif not f.init:
            continue  # the class attribute holds the default
        body.append(f"__dataclass_builtins_object__.__setattr__({self_name},{f.name!r},{value})")
        if f.init:
            default = "" if f.default is _MISSING and f.default_factory is _MISSING else f"=_dflt_{f.name}"
            default = "=_HAS_DEFAULT_FACTORY" if f.default_factory is not _MISSING and f.init else default
            (kw_params if f.kw_only else params).append(f"{f.name}:_type_{f.name}{default}")
    if has_post_init:
        body.append(f"{self_name}.__post_init__()")
    signature = ",".join([self_name, *params, *(["*", *kw_params] if kw_params else [])])
    lines = "\n".join(f" {line}" for line in body or ["pass"])
    return f"def __init__({signature}) -> _return_type:\n{lines}\n"


def _source(name: str, owner: type, names: dict[str, Any]) -> str:
    """The method's source as Python 3.11's ``dataclasses`` writes it (_init_fn, _repr_fn, _cmp_fn, _hash_fn)."""
    fields = dataclasses.fields(owner)
    if name == "__init__":
        names.update(_HAS_DEFAULT_FACTORY=_FACTORY, __dataclass_builtins_object__=object, _return_type=None)
        return _init_source(list(fields), names, hasattr(owner, "__post_init__"))
    if name == "__repr__":
        shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
        return f'def __repr__(self):\n return self.__class__.__qualname__ + f"({shown})"\n'
    if name == "__eq__":
        names_ = [f.name for f in fields if f.compare]
        mine, theirs = ("".join(f"{who}.{n}," for n in names_) for who in ("self", "other"))
        return (
            f"def __eq__(self, other):\n if other.__class__ is self.__class__:\n  return ({mine})==({theirs})\n"
            " return NotImplemented\n"
        )
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    return f"def __hash__(self):\n return hash(({''.join(f'self.{n},' for n in hashed)}))\n"


def _owner(obj: Any, generic: Callable[..., Any], name: str) -> type:
    """The class whose ``name`` is the shared ``generic`` running now: the nearest in the MRO that holds it."""
    return next(k for k in type(obj).__mro__ if vars(k).get(name) is generic)


def _compiled(obj: Any, generic: Callable[..., Any], name: str) -> Callable[..., Any]:
    """On a class's first repr, ``==`` or ``hash`` (for ``__init__``, past its ``COMPILE_AFTER``-th instance): the
    method ``dataclass`` would have generated (the same source, for the class that holds the generic one, with its
    fields), put in the generic one's place. A record that is never printed, compared or hashed never compiles
    those; one hashed a million times (a plan's layers, in ``kvplan fit``) runs the generated code."""
    return _compile(_owner(obj, generic, name), name)


def _compile(owner: type, name: str) -> Callable[..., Any]:
    names: dict[str, Any] = {}
    source = _source(name, owner, names)
    space: dict[str, Any] = {}
    exec(compile(source, f"<record {owner.__qualname__}>", "exec", dont_inherit=True), names, space)  # no __future__
    method: Callable[..., Any] = space[name]
    method.__qualname__ = f"{owner.__qualname__}.{name}"
    if name == "__repr__":
        method = recursive_repr()(method)
    setattr(owner, name, method)
    return method


COMPILE_AFTER = 32
"""Instances of a record class the shared ``__init__`` builds before the class's own is compiled (0.14 ms a class):
`kvplan admit --ctx 1M` builds 51 record classes, 43 of them fewer times than this (a few us an instance here,
0.6 us compiled); a class built more often (a plan's layers, knobs, terms) runs dataclass's code from then on."""


class _Binder:
    """``__init__``'s arguments bound to one record class's fields as the generated ``__init__`` binds them
    (dataclasses._init_fn): a call it cannot bind (a missing, unknown or repeated argument) goes to the compiled
    method, which raises Python's own TypeError."""

    __slots__ = ("calls", "fields", "names", "positional", "post_init")

    def __init__(self, owner: type) -> None:
        fields = dataclasses.fields(owner)
        self.calls = 0
        self.fields = [(f.name, f.init, f.default, f.default_factory) for f in fields]
        self.names = {f.name for f in fields if f.init}
        self.positional = [f.name for f in fields if f.init and not f.kw_only]
        self.post_init = hasattr(owner, "__post_init__")

    def bind(self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if len(args) > len(self.positional):
            return False
        values = dict(zip(self.positional, args, strict=False))
        for key, value in kwargs.items():
            if key in values or key not in self.names:
                return False
            values[key] = value
        if any(init and n not in values and d is _MISSING and f is _MISSING for n, init, d, f in self.fields):
            return False
        for name, init, default, factory in self.fields:
            if name in values:
                object.__setattr__(obj, name, values[name])
            elif factory is not _MISSING:
                object.__setattr__(obj, name, factory())
            elif init:
                object.__setattr__(obj, name, default)
        if self.post_init:
            obj.__post_init__()
        return True


_binders: dict[type, _Binder] = {}


def _init(self: Any, /, *args: Any, **kwargs: Any) -> None:
    owner = _owner(self, _init, "__init__")
    binder = _binders.get(owner) or _binders.setdefault(owner, _Binder(owner))
    binder.calls += 1
    if binder.calls > COMPILE_AFTER or not binder.bind(self, args, kwargs):
        _compile(owner, "__init__")(self, *args, **kwargs)


class _Signature:
    """A record class's ``__signature__``: asked for (``inspect.signature``), it compiles the class's ``__init__``
    where the shared one still stands in for it, and answers None, so that inspect reads that ``__init__`` as it
    reads dataclass's."""

    def __get__(self, obj: object, owner: type) -> None:
        holder = next((k for k in owner.__mro__ if "__init__" in vars(k)), None)
        if holder is not None and vars(holder)["__init__"] is _init:
            _compile(holder, "__init__")


_SIGNATURE = _Signature()


def _repr(self: Any) -> str:
    text: str = _compiled(self, _repr, "__repr__")(self)
    return text


def _eq(self: Any, other: object) -> object:  # a bool, or NotImplemented
    return _compiled(self, _eq, "__eq__")(self, other)


def _hash(self: Any) -> int:
    value: int = _compiled(self, _hash, "__hash__")(self)
    return value


def _names(owner: type) -> set[str]:
    """The fields a plain subclass of a record may not set (not its ClassVars: ``dataclasses`` leaves those out)."""
    return {f.name for f in dataclasses.fields(owner)}


def _frozen_run(obj: Any, generic: Callable[..., Any], name: str) -> tuple[type, type]:
    """The nearest class whose ``name`` is the shared ``generic``, and the last class of the run that follows it
    without a ``name`` of its own or with the same one: a parent record's check is the child's on fewer fields, and
    calling it through ``super()`` would find the child again."""
    mro = type(obj).__mro__
    first = last = next(i for i, k in enumerate(mro) if vars(k).get(name) is generic)
    while vars(mro[last + 1]).get(name, generic) is generic:  # object defines both: the run ends there
        last += 1
    return mro[first], mro[last]


def _setattr(self: Any, name: str, value: Any) -> None:
    """``dataclasses._frozen_get_del_attr``: no field of a record is set, nor anything on the record class itself;
    a plain subclass may set its own attributes."""
    owner, last = _frozen_run(self, _setattr, "__setattr__")
    if owner is self.__class__ or name in _names(owner):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    super(last, self).__setattr__(name, value)  # type: ignore[arg-type]  # (mypy: super outside a class)


def _delattr(self: Any, name: str) -> None:
    owner, last = _frozen_run(self, _delattr, "__delattr__")
    if owner is self.__class__ or name in _names(owner):
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    super(last, self).__delattr__(name)  # type: ignore[arg-type]  # (mypy: super outside a class)


for _f, _n in ((_init, "__init__"), (_repr, "__repr__"), (_eq, "__eq__"), (_hash, "__hash__")):
    _f.__name__ = _n
for _f, _n in ((_setattr, "__setattr__"), (_delattr, "__delattr__")):
    _f.__name__ = _n


def _doc(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> str:
    """The docstring ``dataclass`` gives an undocumented class: its name and ``inspect.signature`` of the class."""
    shown = [f for f in fields if f.init]
    parts: list[str] = []
    for kw in (False, True):
        chosen = [f for f in shown if f.kw_only is kw]
        parts += ["*"] if kw and chosen else []
        for f in chosen:
            text = f"{f.name}: {inspect.formatannotation(f.type)}"
            if f.default is not _MISSING:
                text += f" = {f.default!r}"
            elif f.default_factory is not _MISSING:
                text += " = <factory>"
            parts.append(text)
    return f"{cls.__name__}({', '.join(parts)})"


def _check_order(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """The error ``dataclass`` raises when the class is defined (``_init_fn``), not at its first instance."""
    seen_default = False
    for f in fields:
        if not f.init or f.kw_only:
            continue
        if f.default is not _MISSING or f.default_factory is not _MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _plain(cls: type) -> bool:
    """Every dataclass parent is a record built here, and no InitVar annotation (read as text: kvplan's annotations
    are strings): every field ``__init__`` takes is a regular one (a ClassVar is in no method)."""
    parents = (base for base in cls.__mro__[1:] if "__dataclass_fields__" in vars(base))
    if any(vars(base).get("__setattr__") is not _setattr for base in parents):
        return False
    notes = vars(cls).get("__annotations__", {}).values()
    return not any("InitVar" in str(a) for a in notes)


def _lazy(cls: type[T], kw_only: bool) -> type[T]:
    """The record built with ``dataclass`` collecting its fields only (a ``_plain`` class)."""
    body = dict(cls.__dict__)
    for name in ("__setattr__", "__delattr__"):
        if name in body:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    documented = bool(cls.__doc__)
    if not documented:
        cls.__doc__ = "(record)"  # dataclass would call inspect.signature for it
    parents = [vars(b)["__dataclass_params__"] for b in cls.__mro__[1:] if "__dataclass_params__" in vars(b)]
    for params in parents:  # dataclass refuses a non-frozen child of a frozen parent: this one is frozen by _setattr
        params.frozen = False
    try:
        out = dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)
    finally:
        for params in parents:
            params.frozen = True
    fields = dataclasses.fields(out)  # type: ignore[arg-type]
    _check_order(out, fields)
    params = out.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.frozen = True
    if not documented:
        out.__doc__ = _doc(out, fields)
    for name, method in (("__init__", _init), ("__setattr__", _setattr), ("__delattr__", _delattr)):
        if name not in body:
            setattr(out, name, method)
    if "__init__" not in body and "__signature__" not in body:
        out.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
    return out


def _build(cls: type[T], kw_only: bool) -> type[T]:
    if not _LAZY:
        return dataclasses.dataclass(frozen=True, kw_only=kw_only)(cls)
    body = dict(cls.__dict__)
    if _plain(cls):
        out = _lazy(cls, kw_only)
    else:
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
