"""Bounds on the work a call does, for tests that used to assert a wall-clock time (issue 26: a time limit is red
on any loaded machine; speed itself lives in benchmarks/).

- `calls`: the Python and C function calls a call makes (sys.setprofile), a deterministic count;
- `lines`: the Python lines it runs (sys.settrace), stopped with `WorkExceeded` past a budget, so a runaway loop
  fails instead of hanging;
- `growth`: how this process's CPU time grows from n to 4n, for work done inside C (a regex, a copy) that no
  counter sees: linear work grows 4x, quadratic 16x, whatever else the machine is doing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


class WorkExceeded(AssertionError):
    """More Python lines ran than the budget allows."""


def calls(fn: Callable[[], T]) -> tuple[T, int]:
    """fn's result and the number of function calls (Python and C) it made."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(previous)
    return result, count


def lines(fn: Callable[[], T], budget: int) -> tuple[T, int]:
    """fn's result and the Python lines it ran; raises WorkExceeded as soon as they pass `budget`."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if count > budget:
                raise WorkExceeded(f"more than {budget:,} Python lines run")
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
    return result, count


def _cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def growth(run: Callable[[int], object], n: int, repeat: int = 3) -> tuple[float, float]:
    """The least CPU seconds of run(n) and of run(4n) over `repeat` tries each."""
    return _cpu(lambda: run(n), repeat), _cpu(lambda: run(4 * n), repeat)


def assert_linear(run: Callable[[int], object], n: int, what: str = "") -> None:
    """run(4n) costs under 8x run(n): linear work is 4x, quadratic 16x. The millisecond allows for the timer's
    grain when both are near zero (a quadratic pass over 4n costs seconds, so it cannot hide inside it)."""
    small, large = growth(run, n)
    assert large <= 8 * small + 1e-3, f"{what}: {small * 1e3:.1f} ms at n, {large * 1e3:.1f} ms at 4n (want ~4x)"
