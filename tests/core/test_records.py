"""kvplan.record against dataclasses.dataclass(frozen=True): the same class, built both ways, must answer
alike (repr, ==, hash, frozen errors, replace, fields, kw_only, inheritance either way)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, ClassVar  # noqa: F401 (dataclasses reads "ClassVar[str]" through this module)

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


INIT_FIELDS = {"a": "int", "b": "str", "c": "list[int]", "d": "int", "e": "int", "f": "list[int]", "g": "int"}


def _init_body(post_init: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "b": "x",
        "c": field(default_factory=list),
        "d": field(default=3, init=False),
        "e": field(default_factory=lambda: 9, init=False),
        "f": field(default_factory=lambda: [1], kw_only=True),
        "g": field(kw_only=True),
    }
    if post_init:

        def __post_init__(self: Any) -> None:
            object.__setattr__(self, "d", self.a + self.g)

        body["__post_init__"] = __post_init__
    return body


def _built(cls: type, *args: Any, **kwargs: Any) -> list[object]:
    try:
        x = cls(*args, **kwargs)
    except TypeError as e:  # the generated __init__'s own message, class name included
        return [str(e)]
    return [vars(x), repr(x), x == cls(*args, **kwargs), str(inspect.signature(cls)), cls.__doc__, cls.__match_args__]


@pytest.mark.parametrize("post_init", [False, True])
def test_init_defaults_factories_kw_only_and_post_init_answer_as_dataclass(post_init: bool) -> None:
    # dataclasses._init_fn (Python 3.11): positional then keyword-only parameters, `=_dflt_b`, factories behind the
    # `_HAS_DEFAULT_FACTORY` marker, init=False fields from the class default or their factory, then __post_init__
    std, rec = _pair(_init_body(post_init), INIT_FIELDS)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {"g": 2}),
        ((1, "y", [5]), {"f": [], "g": 2}),
        ((), {"a": 1, "g": 2, "c": [7]}),
        ((1,), {}),  # missing keyword-only argument: 'g'
        ((1, "y", [5], 4), {"g": 2}),  # too many positional arguments
        ((1,), {"g": 2, "d": 4}),  # d is init=False: unexpected keyword argument
    ]
    for args, kwargs in calls:
        assert _built(rec, *args, **kwargs) == _built(std, *args, **kwargs), (args, kwargs)
    assert rec(1, g=2).c is not rec(1, g=2).c  # a fresh list each time, as dataclass's factory gives


def test_a_record_compiles_its_init_after_its_first_instances_only() -> None:
    # what saves admit's start-up: no __init__, __setattr__ or __delattr__ written per class at import, and no
    # __init__ compiled for the 43 of admit's 51 record classes it builds fewer than COMPILE_AFTER times (issue 31
    # item 4); a class built more, or whose signature is asked for, runs dataclass's own __init__
    import kvplan

    @record
    class Rec:
        a: int

    assert vars(Rec)["__init__"] is kvplan._init
    assert vars(Rec)["__setattr__"] is kvplan._setattr and vars(Rec)["__delattr__"] is kvplan._delattr
    assert [Rec(i).a for i in range(kvplan.COMPILE_AFTER)] == list(range(kvplan.COMPILE_AFTER))
    assert vars(Rec)["__init__"] is kvplan._init  # bound by the shared __init__ so far
    assert Rec(7).a == 7 and vars(Rec)["__init__"] is not kvplan._init  # compiled, in the stub's place
    assert vars(Rec)["__init__"].__qualname__.endswith("Rec.__init__")
    assert Rec.__dataclass_params__.init and Rec.__dataclass_params__.frozen  # type: ignore[attr-defined]

    @record
    class Asked:
        a: int
        b: str = "x"

    assert str(inspect.signature(Asked)) == "(a: 'int', b: 'str' = 'x') -> None"
    assert vars(Asked)["__init__"] is not kvplan._init  # the signature is the compiled __init__'s


@pytest.mark.parametrize("post_init", [False, True])
def test_the_shared_init_binds_each_call_as_dataclass_does(post_init: bool) -> None:
    # every call on a fresh pair (so the record binds it with the shared __init__, not the compiled one): the same
    # fields, factories called afresh, init=False fields from their default or factory, __post_init__ after them;
    # a call it cannot bind raises dataclass's own TypeError (the compiled __init__'s, class name included)
    import kvplan

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {"g": 2}),
        ((1, "y", [5]), {"f": [], "g": 2}),
        ((), {"a": 1, "g": 2, "c": [7]}),
        ((1,), {"b": "z", "g": 2}),
        ((1,), {}),  # missing keyword-only argument: 'g'
        ((1, "y", [5], 4), {"g": 2}),  # too many positional arguments
        ((1,), {"g": 2, "d": 4}),  # d is init=False: unexpected keyword argument
        ((1,), {"a": 1, "g": 2}),  # a given twice
        ((), {"g": 2}),  # missing positional argument: 'a'
    ]
    for args, kwargs in calls:
        std, rec = _pair(_init_body(post_init), INIT_FIELDS)
        try:
            x = rec(*args, **kwargs)
        except TypeError as e:
            with pytest.raises(TypeError) as expected:
                std(*args, **kwargs)
            assert str(e) == str(expected.value), (args, kwargs)
            continue
        y = std(*args, **kwargs)
        assert (vars(x), repr(x)) == (vars(y), repr(y)), (args, kwargs)
        assert vars(rec)["__init__"] is kvplan._init  # bound without compiling
        if len(args) < 3 and "c" not in kwargs:
            assert x.c is not rec(*args, **kwargs).c  # a fresh list each time
    std, rec = _pair({}, {"self": "int", "x": "int"})  # a field named self, by keyword too
    assert vars(rec(self=1, x=2)) == vars(std(self=1, x=2)) and vars(rec(1, 2)) == vars(std(1, 2))


def test_a_plain_subclass_is_bound_by_its_records_fields() -> None:
    @record
    class Base:
        a: int
        b: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", [*self.b, self.a])

    class Plain(Base):
        pass

    p = Plain(3)
    assert type(p) is Plain and (p.a, p.b) == (3, [3]) and Base(3) == Base(3, [])


def test_docstrings_signatures_and_definition_errors_follow_dataclass() -> None:
    documented = {"__doc__": "Mine."}
    for body, notes in ((documented, {"a": "int"}), ({"a": field(default=(1, "x"))}, {"a": "tuple[int, str]"})):
        std, rec = _pair(dict(body), notes)
        assert rec.__doc__ == std.__doc__
    std, rec = _pair({"b": 1}, {"a": "int", "b": "int"}, kw_only=True)
    assert rec.__doc__ == std.__doc__ == "Rec(*, a: 'int', b: 'int' = 1)"
    std, rec = _pair({}, {"self": "int", "x": "int"})  # a field named self: dataclass names the instance otherwise
    assert _built(rec, 1, 2) == _built(std, 1, 2)
    for deco in (dataclass(frozen=True), record):  # the order error comes when the class is defined, both ways
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            deco(type("Bad", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))
    for deco in (dataclass(frozen=True), record):
        with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__ in class Own"):
            deco(type("Own", (), {"__annotations__": {"a": "int"}, "__setattr__": lambda s, n, v: None}))

    def own_init(self: Any, a: int) -> None:
        object.__setattr__(self, "a", a * 2)

    std, rec = _pair({"__init__": own_init}, {"a": "int"})
    assert rec(2).a == std(2).a == 4


@record
class Pickled:
    a: int
    b: tuple[int, ...] = ()


def test_records_pickle_copy_and_replace() -> None:
    # simulate --jobs forks workers and may send records between processes: pickle by value, frozen after loading
    x = Pickled(1, (2, 3))
    for y in (pickle.loads(pickle.dumps(x)), copy.copy(x), copy.deepcopy(x), dataclasses.replace(x)):
        assert y == x and y is not x and repr(y) == "Pickled(a=1, b=(2, 3))"
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a'"):
            y.a = 2  # type: ignore[misc]
    assert dataclasses.replace(x, b=(4,)) == Pickled(1, (4,))


def test_classvars_and_record_children_answer_as_dataclass() -> None:
    # dataclasses leaves a ClassVar out of every method; a child's __init__ takes the parent's fields first
    # (_process_class collects the bases' fields in reverse MRO order)
    made: dict[str, type] = {}
    for label, deco, child_deco in (("std", dataclass(frozen=True), dataclass(frozen=True)), ("rec", record, record)):
        ns = {"__annotations__": {"a": "int", "kind": "ClassVar[str]"}, "__module__": __name__, "kind": "base"}
        base = deco(type("Base", (), ns))
        child_ns = {"__annotations__": {"b": "int", "kind": "ClassVar[str]"}, "__module__": __name__, "kind": "kid"}
        child = child_deco(type("Kid", (base,), dict(child_ns, b=2)))
        made[label], made[label + "_base"] = child, base
    std, rec = made["std"], made["rec"]
    assert _built(rec, 1) == _built(std, 1) and _built(rec, 1, 3) == _built(std, 1, 3)
    assert _answers_child(rec) == _answers_child(std)
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        dataclass(type("Loose", (made["rec_base"],), {"__annotations__": {"c": "int"}}))
    assert made["rec_base"].__dataclass_params__.frozen  # type: ignore[attr-defined]  # restored after the child
    assert vars(rec)["__setattr__"] is vars(made["rec_base"])["__setattr__"]  # the child is built lazily too


def _answers_child(cls: type) -> list[object]:
    x = cls(1)
    out: list[object] = [x.kind, repr(x), x == cls(1), x != cls(1, 3), [f.name for f in dataclasses.fields(cls)]]
    for attempt in (lambda: setattr(x, "a", 2), lambda: setattr(x, "kind", "k"), lambda: delattr(x, "b")):
        with pytest.raises(FrozenInstanceError) as e:
            attempt()
        out.append(str(e.value))

    class Plain(cls):  # type: ignore[valid-type,misc]  # not a dataclass: may set a ClassVar's name, not a field
        pass

    p = Plain(1)
    p.kind = "mine"
    out.append(p.kind)
    with pytest.raises(FrozenInstanceError):
        p.b = 5
    return out


def test_initvar_and_a_plain_dataclass_parent_go_through_dataclass() -> None:
    def post(self: Any, scale: int) -> None:
        object.__setattr__(self, "a", self.a * scale)

    body = {"__post_init__": post}
    std, rec = _pair(body, {"a": "int", "scale": "dataclasses.InitVar[int]"})
    assert _built(rec, 2, 3) == _built(std, 2, 3)

    @dataclass(frozen=True)
    class Parent:
        a: int

    @record
    class Child(Parent):
        b: int = 0

    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)") and Child(1) == Child(1, 0)


def test_off_python_3_11_a_record_is_a_plain_frozen_dataclass(monkeypatch: pytest.MonkeyPatch) -> None:
    # the lazy methods copy Python 3.11's dataclasses sources; elsewhere @record is dataclass(frozen=True) itself
    import dataclasses as dc

    import kvplan

    monkeypatch.setattr(kvplan, "_LAZY", False)

    @kvplan.record(kw_only=True)
    class Point:
        x: int
        y: int = 2

    p = Point(x=1)
    assert (p, repr(p), hash(p) == hash(Point(x=1, y=2))) == (
        Point(x=1, y=2),
        "test_off_python_3_11_a_record_is_a_plain_frozen_dataclass.<locals>.Point(x=1, y=2)",
        True,
    )
    with pytest.raises(dc.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert Point.__init__.__qualname__.endswith("Point.__init__")
