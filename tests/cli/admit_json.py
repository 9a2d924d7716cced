"""`kvplan admit ... --format json` run in process, and one named check of its report: the helpers the CLI pool
tests share (each model's pool goldens read the same JSON)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def admit_json(model: str, ctx: str, *args: str, code: int = 0) -> dict[str, Any]:
    """The JSON report of `kvplan admit --ctx CTX --model MODEL ARGS`, after checking its exit code."""
    r = runner.invoke(app, ["admit", "--ctx", ctx, "--model", model, *args, "--format", "json"])
    assert r.exit_code == code, (r.exit_code, r.stdout[-800:], r.stderr)
    data = json.loads(r.stdout)
    assert isinstance(data, dict)
    return data


def check_named(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The one check called NAME in an admit report."""
    found = [c for c in data["checks"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in data["checks"]]
    return found[0]
