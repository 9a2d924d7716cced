"""`kvplan fit --pd` with SLAs end to end: each side's SLA table, the load each was priced under, the hand-off
in the prefill side's TTFT, and the JSON fields."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "200"})
MODEL = ("--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "vllm", "--max-gpus", "2", "--pd")
ARGS = ("fit", *MODEL, "--require-ttft", "60s", "--require-tpot", "20ms", "--isl", "32K", "--osl", "1K",
        "--concurrency", "16")  # fmt: skip


def test_each_side_shows_its_own_sla_and_load() -> None:
    r = runner.invoke(app, list(ARGS))
    assert r.exit_code == 0, r.output
    out = r.output
    assert "Prefill instance — SLA" in out and "Decode instance — SLA" in out
    assert "prefill side's load" in out and "decode side's load" in out and "hand-off in TTFT" in out
    d = json.loads(runner.invoke(app, [*ARGS, "--format", "json"]).stdout)
    assert d["sla_prefill_think_s"] > 0 and d["prefill"]["sla"]["side"] == "prefill"
    assert d["decode"]["sla"]["side"] == "decode"
    best = d["prefill"]["frontier"][0]["sla"]
    assert [t["name"] for t in best["terms"]] == ["TTFT"] and best["hand_off_us"]["value"] > 0
    assert [t["name"] for t in d["decode"]["frontier"][0]["sla"]["terms"]] == ["TPOT"]
