"""Every report about a deployment the engine would refuse to start says so (issue 9, item 7).

The refused deployment: the SGLang preset with mem_fraction_static=0.6. SGLang's slack is
pre_load_free × (1 − 0.6) = 138.80 GiB × 0.4 = 55.52 GiB, more than the 44.34 GiB left after the
94.46 GiB of weights (138.80 − 94.46), so "Loaded weights leave no GPU memory for the KV cache".
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.models.presets import preset_names
from kvplan.render import startup_line

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"})

REFUSED = ["--set", "mem_fraction_static=0.6"]
REASON = "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.6"


def _trace(tmp_path: Path) -> Path:
    p = tmp_path / "t.jsonl"
    rows = [{"timestamp": i, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]} for i in range(3)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    return {
        "budget": ["budget", *REFUSED],
        "prefix": ["prefix", "--ctx", "128K", "--hit", "64K", *REFUSED],
        "transfer": ["transfer", "--ctx", "128K", *REFUSED],
        "workspace": ["workspace", *REFUSED],
        "admit": ["admit", "--ctx", "128K", *REFUSED],
        "deployments show": ["deployments", "show", "glm-5.3-8xh200-sglang", *REFUSED],
        "simulate --deploy": [
            *("simulate", str(_trace(tmp_path)), "--deploy", "glm-5.3-8xh200-sglang", "--capacity", "4096"),
            *REFUSED,
        ],
    }


COMMANDS = ["budget", "prefix", "transfer", "workspace", "admit", "deployments show", "simulate --deploy"]


def test_the_reason_is_the_engines() -> None:
    plan = load_plan(None, None, ["mem_fraction_static=0.6"])
    assert plan.startup_error == REASON
    assert startup_line(REASON).startswith("ENGINE WOULD NOT START: Loaded weights leave no GPU memory")


@pytest.mark.parametrize("name", COMMANDS)
def test_every_report_says_the_engine_would_not_start(tmp_path: Path, name: str) -> None:
    # Regression: budget/prefix/transfer/deployments show/simulate printed the pool with no word of it.
    args = _commands(tmp_path)[name]
    table = runner.invoke(app, args)
    assert table.exit_code in (0, 1), table.output  # a verdict, never a crash
    assert "ENGINE WOULD NOT START: " + REASON in " ".join(table.stdout.split())
    md = runner.invoke(app, [*args, "--format", "markdown"])
    assert f"**{startup_line(REASON)}**" in md.stdout
    data = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert data["startup_error"] == REASON


@pytest.mark.parametrize("name", COMMANDS)
def test_a_deployment_that_starts_has_no_such_line(tmp_path: Path, name: str) -> None:
    args = [a for a in _commands(tmp_path)[name] if a not in REFUSED]
    out = runner.invoke(app, args).stdout
    assert "WOULD NOT START" not in out
    assert "startup_error" not in json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)


def test_diff_says_which_side_would_not_start(tmp_path: Path) -> None:
    refused = tmp_path / "refused.yaml"
    preset = Path(str(resources.files("kvplan") / "configs" / "deployments" / "glm-5.3-8xh200-sglang.yaml"))
    refused.write_text(preset.read_text() + "mem_fraction_static: 0.6\n")
    r = runner.invoke(app, ["diff", "glm-5.3-8xh200-sglang", str(refused), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["startup_error"] == f"{refused}: {REASON}"


def test_deployments_list_marks_every_preset_the_engine_refuses() -> None:
    names = preset_names("deployments")
    data = json.loads(runner.invoke(app, ["deployments", "list", "--format", "json"]).stdout)
    listed = {d["name"]: d for d in data["deployments"]}
    table = runner.invoke(app, ["deployments", "list"]).stdout
    for n in names:
        plan = load_plan(None, n, None)
        assert listed[n]["startup_error"] == plan.startup_error
        assert listed[n]["pool_tokens"] == plan.logged_tokens
        row = next(line for line in table.splitlines() if line.startswith(n))
        assert ("does not start" in row) is (plan.startup_error is not None)


def test_simulate_on_a_refused_deployment_without_capacity_says_why(tmp_path: Path) -> None:
    # Regression: "--capacity None: less than one page of 64 tokens" when --capacity was never given.
    args = ["simulate", str(_trace(tmp_path)), "--deploy", "glm-5.3-8xh200-sglang", *REFUSED]
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    assert r.stderr == (
        f"kvplan: error: glm-5.3-8xh200-sglang (+ --set): the engine would not start ({REASON}), so it has no "
        "pool; give --capacity to replay a pool of your own\n"
    )
