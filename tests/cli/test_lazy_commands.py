"""Issue 15 item 5: the CLI builds and imports only the command it runs (kvplan/cli/_app.py COMMANDS)."""

from __future__ import annotations

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._app import COMMANDS
from tests.cli.modules_probe import modules_after

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def test_admit_imports_no_other_command() -> None:
    mods = modules_after("admit", "--ctx", "1M")
    assert "kvplan.cli.admit" in mods
    others = {module for name, (module, _) in COMMANDS.items() if module != "kvplan.cli.admit"}
    assert not mods & others, sorted(mods & others)
    # nor what those commands use: the simulator, the log reader, the probes, torch, NVML
    assert not {m for m in mods if m.startswith(("kvplan.sim", "kvplan.runbook", "kvplan.probes", "torch", "pynvml"))}


def test_help_lists_every_command_in_order() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    listed = [line.split()[0] for line in r.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == list(COMMANDS)


def test_every_command_builds_under_its_name() -> None:
    for name in COMMANDS:
        r = runner.invoke(app, [name, "--help"])
        assert r.exit_code == 0, (name, r.output)
        assert f" {name} " in r.stdout.splitlines()[0] + " ", (name, r.stdout.splitlines()[0])


def test_a_typo_still_gets_a_suggestion() -> None:
    r = runner.invoke(app, ["simulat"])
    assert r.exit_code == 2
    assert "Did you mean 'simulate'" in r.output


def test_simulate_without_a_deployment_loads_no_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Issue 31: a trace replay plans no pool, so it never pays for the engines and models (about a third of
    # kvplan simulate's start-up on the development machine); the trace reader and the simulator are all it needs.
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n')
    mods = modules_after("simulate", str(trace), "--format", "json")
    assert "kvplan.sim.ideal" in mods
    assert not {m for m in mods if m.startswith(("kvplan.engines", "kvplan.models"))}, sorted(mods)
