"""Help text and `kvplan knobs` (issue 9 items 15 and 18): nothing in brackets is eaten, one default each,
errors name the option the user typed, and every knob is listed once from kvplan.models.deploy.KNOBS."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.models.deploy import ENGINE_KNOBS, KNOBS, Deployment

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("command", "text"),
    [
        # Regression: rich markup ate every [...] in help strings
        (["admit"], "[default: glm-5.3-8xh200-sglang]"),
        (["budget"], "[default: glm-5.3-8xh200-sglang]"),
        (["gate"], "[default: ./kvplan.lock if present]"),
        (["prefix"], "[plot]"),
        (["workspace"], "[default: the longest the pool holds for --batch]"),
    ],
)
def test_brackets_in_help_survive(command: list[str], text: str) -> None:
    r = invoke(*command, "--help")
    assert r.exit_code == 0
    assert text in flat(r.stdout)


def test_validate_device_names_its_default_once() -> None:
    # Regression: "cuda (default) or cpu ... [default: cuda]"
    out = flat(invoke("validate", "--help").stdout)
    assert "(default)" not in out and "[default: cuda]" in out


@pytest.mark.parametrize(("option", "metavar"), [("--deploy", "NAME|PATH"), ("--set", "KNOB=VALUE")])
def test_shared_options_have_readable_metavars(option: str, metavar: str) -> None:
    assert f"{option} {metavar}" in invoke("admit", "--help").stdout


def test_lock_usage_names_its_argument() -> None:
    # Regression: "Usage: ... lock [OPTIONS] {configs}..."
    usage = invoke("lock", "--help").stdout.splitlines()[0]
    assert "CONFIG..." in usage and "{configs}" not in usage


def test_negative_mtp_is_named_as_mtp() -> None:
    # Regression: `workspace --mtp -1` said "--draft must be positive"
    r = invoke("workspace", "--mtp", "-1")
    assert r.exit_code == 2
    assert r.stderr == "kvplan: error: --mtp must be 0 or more draft tokens, got -1\n"


def test_knobs_lists_every_knob_once_in_order() -> None:
    r = invoke("knobs", "--format", "json")
    assert r.exit_code == 0, r.output
    knobs = json.loads(r.stdout)["knobs"]
    assert [k["name"] for k in knobs] == list(KNOBS)
    by_name = {k["name"]: k for k in knobs}
    # one-engine knobs name that engine only, and what the other uses instead
    for name, (engine, other) in ENGINE_KNOBS.items():
        assert by_name[name]["engines"] == [engine] and by_name[name]["other_engine"] == other
    assert by_name["tp"]["engines"] == ["sglang", "vllm"]


def test_knobs_units_and_defaults_come_from_the_model() -> None:
    knobs = {k["name"]: k for k in json.loads(invoke("knobs", "--format", "json").stdout)["knobs"]}
    defaults = {f.name: f.default for f in fields(Deployment)}
    # dataclass defaults: dcp 1, gpus_per_node 8, no draft tokens; None means the engine computes it
    assert (defaults["dcp"], defaults["gpus_per_node"], defaults["speculative_num_draft_tokens"]) == (1, 8, 0)
    assert (knobs["dcp"]["default"], knobs["gpus_per_node"]["default"]) == ("1", "8")
    assert knobs["mem_fraction_static"]["default"] == "engine's"
    assert knobs["model"]["default"] == "required"
    assert knobs["weights_per_gpu"]["unit"].startswith("bytes")
    assert knobs["context_length"]["unit"].startswith("tokens")
    assert "max_model_len" in knobs["context_length"]["aliases"]
    table = invoke("knobs").stdout
    for name in KNOBS:
        assert any(line.startswith(name + " ") for line in table.splitlines()), name


COMMANDS = [
    ["admit"], ["budget"], ["workspace"], ["prefix"], ["transfer"], ["doctor"], ["lock"], ["gate"], ["diff"],
    ["probe"], ["validate"], ["simulate"], ["knobs"], ["models", "list"], ["models", "show"],
    ["deployments", "list"], ["deployments", "show"], ["fit"], ["gpus"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_no_markup_left_over(command: list[str]) -> None:
    # Regression: with markup off, escapes written for rich ("\\[default: ...]") showed their backslash
    r = invoke(*command, "--help")
    assert r.exit_code == 0, r.output
    assert "\\[" not in r.stdout and "[/" not in r.stdout
    assert not re.search(r"\{[a-z_]+\}", r.stdout.splitlines()[0]), r.stdout.splitlines()[0]  # {configs}, {trace}
