"""The fuzz suite (issue 10): every reader of untrusted input, driven by hypothesis.

Each test asserts the one contract for untrusted input: exit 0/1/2 with at most one error line, never a
traceback, within a time budget. Default runs are a few seconds; `pytest --fuzz-long` runs 2,000 examples
per test.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kvplan.errors import KvplanError

SECONDS = 5.0
"""Time budget of one fuzz example (generous: CI machines are shared)."""


def one_line_error(fn: Callable[[], object]) -> object:
    """fn's result, or None when it raised kvplan's own error with a one-line message; within SECONDS."""
    start = time.monotonic()
    try:
        return fn()
    except KvplanError as e:
        assert "\n" not in str(e)
        return None
    finally:
        assert time.monotonic() - start < SECONDS
