"""kvplan's one strict JSON reader (limits.strict_json), used by config.json, lock files and safetensors headers."""

from __future__ import annotations

import pytest

from kvplan import limits


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[NaN]", "NaN is not a number kvplan reads"),
        ("[1e999]", "1e999 is not a finite number"),  # float('1e999') overflows to inf
        ("[" + "9" * 31 + "]", "a number of 31 digits is past kvplan's limit of 30"),
        ("[" * 65 + "]" * 65, "nested deeper than kvplan's limit of 64 levels"),
        ('{"a":\n  oops}', "not valid JSON"),
    ],
)
def test_refused(text: str, problem: str) -> None:
    with pytest.raises(limits.JsonError) as e:
        limits.strict_json(text)
    assert problem in e.value.problem


def test_accepted_at_the_limits() -> None:
    # 30 digits and 64 levels are still read; brackets inside strings do not count as nesting
    assert limits.strict_json("[" + "9" * 30 + "]") == [int("9" * 30)]
    assert limits.json_depth("[" * 64 + "]" * 64) == 64
    assert limits.strict_json('{"s": "[[[[\\"{{"}') == {"s": '[[[["{{'}


def test_syntax_error_has_its_line() -> None:
    with pytest.raises(limits.JsonError) as e:
        limits.strict_json('{"a": 1,\n "b": }')
    assert e.value.line == 2
