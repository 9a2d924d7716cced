"""kvplan.models.arch.Split is a record with dataclass(order=True)'s comparisons written in its body (not compiled
at import): it must order, compare, hash and print as the dataclass it was."""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

import pytest

from kvplan.models.arch import Split


@dataclass(frozen=True, order=True)
class Split_:  # the class as it was: dataclasses._process_class with order=True (field tuples compared)
    tp: int
    attention: int
    experts: int
    pp: int = 1


def test_split_orders_compares_and_hashes_as_an_ordered_dataclass() -> None:
    values = [(t, a, e, p) for t, a, e, p in itertools.product((1, 8), (1, 8), (1, 8), (1, 2))]
    ops = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)
    for x, y in itertools.product(values, repeat=2):
        for op in ops:
            assert op(Split(*x), Split(*y)) is op(Split_(*x), Split_(*y)), (x, y, op)
        assert (hash(Split(*x)) == hash(Split(*y))) is (hash(Split_(*x)) == hash(Split_(*y)))
    assert sorted(Split(*v) for v in reversed(values)) == [Split(*v) for v in sorted(values)]
    assert repr(Split(8, 8, 8)).endswith("Split(tp=8, attention=8, experts=8, pp=1)")
    for op in ops[:4]:  # another type: NotImplemented both ways, so Python's TypeError, as the dataclass gives
        with pytest.raises(TypeError):
            op(Split(1, 1, 1), (1, 1, 1, 1))
        with pytest.raises(TypeError):
            op(Split_(1, 1, 1), (1, 1, 1, 1))
    assert Split(1, 1, 1).__lt__(Split_(1, 1, 1)) is NotImplemented
