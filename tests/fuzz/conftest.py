"""The fuzz suite (issue 10): every reader of untrusted input, driven by hypothesis.

Each test asserts the one contract for untrusted input: exit 0/1/2 with at most one error line, never a
traceback, within a work budget (function calls, tests/work.py: a count, not a time, so that a loaded machine
cannot turn it red). Default runs are a few seconds; `pytest --fuzz-long` runs 2,000 examples per test.
"""

from __future__ import annotations

from collections.abc import Callable

from kvplan.errors import KvplanError
from tests.work import calls

CALLS = 5_000_000
"""Work budget of one fuzz example, in function calls. A whole CLI run on a fuzzed file made at most 378,552 (measured
over 849 examples of the suite's dev profile); a reader that blows up (a YAML alias bomb, a config laid out per tensor
for 1,000 layers: 59 M calls) passes it."""


DOCTOR_CALLS = 60_000_000
"""Work budget of one doctor run on a (mutated) real log. Read alone (no --model), the doctor plans every model
preset, and each preset's weights are laid out per tensor once: 25,222,053 calls on the unmutated vLLM V0 log of
vllm#10517 (tests/data/logs/doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log), the most of any log in the repo."""


def within_budget(fn: Callable[[], object], what: object = "", budget: int = CALLS) -> object:
    """fn's result; fails when it made more than ``budget`` function calls."""
    result, made = calls(fn)
    assert made < budget, f"{made:,} function calls: {what}"
    return result


def one_line_error(fn: Callable[[], object]) -> object:
    """fn's result, or None when it raised kvplan's own error with a one-line message; within CALLS."""

    def guarded() -> object:
        try:
            return fn()
        except KvplanError as e:
            assert "\n" not in str(e)
            return None

    return within_budget(guarded)
