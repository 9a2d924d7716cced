"""A pytest plugin for scripts/mutate.py: which test ran which line of one module, collected once per module.

    KVPLAN_MUTATE_TARGET=/abs/path/module.py KVPLAN_MUTATE_COVER=out.json pytest -p mutate_cover TESTS

Writes {line: [test ids]} as JSON; lines run outside any test (at import, during collection) are listed under
the id "" (mutate.py then runs every test for them). A tracer (sys.settrace) that follows only the target
file's frames: the stdlib has no coverage.py and sys.monitoring needs Python 3.12.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest

TARGET = os.path.realpath(os.environ.get("KVPLAN_MUTATE_TARGET", ""))
_seen: dict[int, set[str]] = {}
_current = [""]
_is_target: dict[str, bool] = {}


def _local(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "line":
        _seen.setdefault(frame.f_lineno, set()).add(_current[0])
    return _local


def _global(frame: FrameType, event: str, arg: Any) -> Any:
    name = frame.f_code.co_filename
    hit = _is_target.get(name)
    if hit is None:
        hit = _is_target[name] = os.path.realpath(name) == TARGET
    if not hit:
        return None
    _seen.setdefault(frame.f_lineno, set()).add(_current[0])  # the call: a def line, a lambda, a genexpr
    return _local


def pytest_configure(config: pytest.Config) -> None:
    sys.settrace(_global)  # from here on: collection imports the module under ""
    threading.settrace(_global)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    _current[0] = item.nodeid
    sys.settrace(_global)  # a test that set its own tracer and cleared it does not end the collection
    yield
    _current[0] = ""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    sys.settrace(None)
    threading.settrace(None)  # type: ignore[arg-type]
    out = {str(line): sorted(ids) for line, ids in sorted(_seen.items())}
    with open(os.environ["KVPLAN_MUTATE_COVER"], "w") as f:
        json.dump(out, f)
