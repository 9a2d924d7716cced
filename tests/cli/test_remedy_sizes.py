"""Remedy details name sizes in GiB and GB (issue 9 item 17); JSON keeps the raw integers."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})
ARGS = ["admit", "--ctx", "128K", "--set", "max_running_requests=4096"]


def test_req_to_token_remedy_in_gib() -> None:
    # req_to_token at 4,096 running requests: (4,096 + 1) × (1,048,576 + 4) × 4 B = 17,184,129,040 B = 16.00 GiB,
    # more than the 15.82 GiB slack, so admit rejects on the workspace and proposes fewer running requests.
    r = runner.invoke(app, ARGS)
    assert r.exit_code == 1, r.output
    assert "instead of 16.00 GiB (17.18 GB)" in r.stdout
    assert "17,184,129,040 B" not in r.stdout


def test_json_remedy_keeps_raw_bytes() -> None:
    r = runner.invoke(app, [*ARGS, "-f", "json"])
    rem = next(m for m in json.loads(r.stdout)["remedies"] if m["knob"] == "max_running_requests")
    assert rem["sizes"]["before"] == (4096 + 1) * (1048576 + 4) * 4
    # after = (m + 1) × 1,048,580 × 4 B for the proposed m
    assert rem["sizes"]["after"] == (rem["value"] + 1) * (1048576 + 4) * 4
    assert "{size:" not in rem["detail"]
