"""kvplan.record against dataclasses.dataclass(frozen=True): the same class, built both ways, must answer
alike (repr, ==, hash, frozen errors, replace, fields, kw_only, inheritance either way)."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from kvplan import record


def _pair(body: dict[str, Any], annotations: dict[str, str], **kw: Any) -> tuple[type, type]:
    """The same class body decorated by dataclass(frozen=True) and by record."""

    def make(deco: Any) -> type:
        ns = {"__annotations__": dict(annotations), "__module__": __name__, **body}
        return deco(type("Rec", (), ns))  # type: ignore[no-any-return]

    std = make(dataclass(frozen=True, **kw))
    rec = make(record(**kw) if kw else record)
    return std, rec


FIELDS = {"a": "int", "b": "str", "c": "list[int]", "d": "float", "e": "int"}
BODY: dict[str, Any] = {
    "b": "x",
    "c": field(default_factory=list, compare=False),
    "d": field(default=1.5, repr=False),
    "e": field(default=7, hash=False),
}


def _answers(cls: type, *args: Any, **kwargs: Any) -> list[object]:
    x, y, z = cls(*args, **kwargs), cls(*args, **kwargs), dataclasses.replace(cls(*args, **kwargs), e=8)
    out: list[object] = [repr(x), x == y, x != y, x == z, x == 1, x.__eq__(1), hash(x) == hash(y), hash(x) == hash(z)]
    out += [hash(x) == hash((x.a, x.b, x.d)), [f.name for f in dataclasses.fields(cls)], dataclasses.asdict(x)]
    out += [cls.__match_args__, repr(dataclasses.replace(x, b="y"))]
    for attempt in (lambda: setattr(x, "a", 2), lambda: delattr(x, "b"), lambda: setattr(x, "new", 1)):
        with pytest.raises(FrozenInstanceError) as e:
            attempt()
        out.append(str(e.value))
    return out


@pytest.mark.parametrize("kw_only", [False, True])
def test_a_record_answers_as_a_frozen_dataclass(kw_only: bool) -> None:
    std, rec = _pair(BODY, FIELDS, kw_only=kw_only) if kw_only else _pair(BODY, FIELDS)
    args: tuple[int, ...] = () if kw_only else (1,)
    kwargs = {"a": 1} if kw_only else {}
    assert _answers(rec, *args, **kwargs) == _answers(std, *args, **kwargs)
    assert dataclasses.is_dataclass(rec) and rec.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_methods_the_body_defines_are_kept_and_hash_follows_dataclass() -> None:
    def eq(self: Any, other: object) -> bool:
        return True

    std, rec = _pair({"__eq__": eq}, {"a": "int"})
    for cls in (std, rec):
        assert cls(1) == cls(2)
    assert hash(rec(1)) == hash(std(1)) == hash((1,))  # the body's __eq__ sets __hash__ None: dataclass adds one
    std, rec = _pair({"__hash__": None}, {"a": "int"})
    for cls in (std, rec):
        with pytest.raises(TypeError):
            hash(cls(1))
    std, rec = _pair({"__repr__": lambda self: "mine"}, {"a": "int"})
    assert repr(std(1)) == repr(rec(1)) == "mine"


def test_inheritance_either_way_and_a_recursive_repr() -> None:
    @record
    class Base:
        a: int
        b: list[object] = field(default_factory=list)

    @dataclass(frozen=True)
    class Std(Base):
        c: int = 0

    @record(kw_only=True)
    class Rec(Base):
        c: int = 0

    assert repr(Std(1, c=2)).endswith(".Std(a=1, b=[], c=2)")
    assert repr(Rec(1, c=2)) == repr(Std(1, c=2)).replace(".Std(", ".Rec(")
    assert Rec(1, c=2) == Rec(1, c=2) != Rec(1, c=3)
    assert Rec(1, c=2) != Base(1)  # another class: NotImplemented both ways, then identity
    x = Base(1)
    x.b.append(x)
    assert repr(x) == "test_inheritance_either_way_and_a_recursive_repr.<locals>.Base(a=1, b=[...])"

    class Plain(Base):  # not a dataclass: the parent's fields, any other attribute may be set
        pass

    p = Plain(1)
    p.other = 2  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError):
        p.a = 2  # type: ignore[misc]
    assert p == Plain(1)
