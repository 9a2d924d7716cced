"""`kvplan perf --acceptance-length` and the per-family default it replaces, end to end (kvplan.perf.spec)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
SG = "glm-5.3-8xh200-sglang"
LOAD = ("--isl", "1K", "--osl", "256", "--concurrency", "4")


def test_an_mtp_deployment_says_which_acceptance_length_it_assumed() -> None:
    r = runner.invoke(app, ["perf", "-d", SG, "--set", "speculative_num_draft_tokens=4", *LOAD, "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # GLM-5.3 has MTP layers: the MTP default, 2.525 in a band of 1.85 – 3.20 (kvplan.perf.spec), D = 4
    assert (d["acceptance_length"], d["acceptance_length_low"], d["acceptance_length_high"]) == (2.525, 1.85, 3.2)
    assert d["verify_tokens"] == 4 and d["acceptance_from"].startswith("default for MTP models")
    assert any(a.startswith("speculative decoding: 4 tokens verified") for a in d["assumptions"])
    r = runner.invoke(app, ["perf", "-d", SG, "--set", "speculative_num_draft_tokens=4", *LOAD, "--format", "json",
                            "--acceptance-length", "3"])  # fmt: skip
    g = json.loads(r.stdout)
    assert g["acceptance_length"] == g["acceptance_length_low"] == 3.0 and g["acceptance_from"].startswith("given")
    assert g["tpot_ms"] < d["tpot_ms"]  # more tokens a verify step: fewer steps a token


def test_without_speculative_decoding_there_is_no_acceptance_length() -> None:
    d = json.loads(runner.invoke(app, ["perf", "-d", SG, *LOAD, "--format", "json"]).stdout)
    assert d["acceptance_length"] is None and d["verify_tokens"] is None


def test_an_acceptance_length_that_does_not_apply_is_one_line_exit_2() -> None:
    r = runner.invoke(app, ["perf", "-d", SG, *LOAD, "--acceptance-length", "2"])
    assert r.exit_code == 2 and "needs speculative decoding" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["perf", "-d", SG, "--set", "speculative_num_draft_tokens=4", *LOAD,
                            "--acceptance-length", "9"])  # fmt: skip
    assert r.exit_code == 2 and "from 1 to the 4 tokens verified" in r.output
    r = runner.invoke(app, ["perf", "-d", SG, *LOAD, "--acceptance-length", "nan"])
    assert r.exit_code == 2 and "Traceback" not in r.output
