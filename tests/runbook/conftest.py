"""Helpers for the runbook tests: fixture logs without their headers, and line numbers found in the text."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook import parse
from kvplan.runbook.doctor import Diagnosis, diagnose
from kvplan.runbook.parse import parse_log

LOGS = Path(__file__).parents[1] / "data" / "logs"
SHARED_LOGS = Path(__file__).parents[2].parent / "shared" / "logs"
KIMI = LOGS / "kimi-k2.yaml"


def parse_patterns() -> dict[str, re.Pattern[str]]:
    """Every module-level pattern of the parse package, from each of its modules (a new module is included)."""
    mods = [importlib.import_module(f"{parse.__name__}.{m.name}") for m in pkgutil.iter_modules(parse.__path__)]
    return {k: v for mod in mods for k, v in vars(mod).items() if isinstance(v, re.Pattern)}


def body(path: Path) -> str:
    """A log file without its header (the comment lines up to the first blank line): a real log has none."""
    text = path.read_text(encoding="utf-8")
    return text.split("\n\n", 1)[1] if text.startswith("#") else text


def fixture(name: str) -> str:
    return body(LOGS / name)


def shared(name: str) -> str:
    """A real excerpt from shared/logs/, read in place; skipped where the shared folder is absent."""
    path = SHARED_LOGS / name
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    return body(path)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based number of the nth line of ``text`` containing ``needle``."""
    seen = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if needle in line:
            seen += 1
            if seen == nth:
                return number
    raise AssertionError(f"{needle!r} not in the text")


def run_doctor(
    text: str,
    *,
    deploy: str | None = None,
    sets: tuple[str, ...] = (),
    model: str | None = None,
    ctx: int | None = None,
    hit: int | None = None,
) -> Diagnosis:
    dep = load_deployment(deploy, sets)
    arch = load_model(model or dep.model)
    return diagnose(arch, dep, parse_log(text, "test.log"), ctx=ctx, hit=hit)
