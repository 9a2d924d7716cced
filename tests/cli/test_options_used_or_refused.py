"""Issue 25 item 4: every option either used or refused, each refusal one line and exit 2.

- a single-value option given twice: click (vendored by typer) kept the last in silence, so
  `fit --require-ctx 1M --require-ctx 128K` searched for 128K alone (kvplan.cli._once.SingleValues);
- an option with no effect given the others: `--link` without `--pd`, `--prefill-tps` / `--tpot-ms` /
  `--trace-format` without `--trace` (kvplan.cli._once.needs);
- a KVPLAN_MAX_*_BYTES variable that is not a positive whole number of bytes with an optional unit was the
  default in silence (`abc`, `-1`, `1.5`, `1K`) or 1 byte (`0`) (kvplan.limits.FileLimit.effective);
- versions are ASCII digits only (`٠.٥.٢٣` was modelled as 0.5.23); an empty version is refused by `diff
  --engine-version` as by `gate --against-version` (kvplan.cli.gate.version_for).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.limits import CONFIG, LimitError

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
FIT = ("fit", "--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off")


def refused(r: Result, *words: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("kvplan: error: "), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [*FIT, "--require-ctx", "1M", "--require-ctx", "128K"],
        [*FIT, "--require-ctx=1M", "--require-ctx", "128K"],
        ["admit", "--ctx", "1M", "--ctx", "128K"],
        ["admit", "--ctx", "8K", "-n", "2", "-n3"],
        ["admit", "--ctx", "8K", "--format", "json", "-f", "table"],
        ["budget", "--ctx", "8K", "--deploy", "glm-5.3-8xh200-sglang", "-d", "glm-5.3-8xh200-vllm"],
    ],
)
def test_single_value_option_given_twice(argv: list[str]) -> None:
    refused(runner.invoke(app, argv), "given twice")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["simulate", "t.csv", "--eagle", "--no-eagle"], "--eagle and --no-eagle both given"),
        ([*FIT, "--require-ctx", "1M", "--pd", "--pd"], "--pd given twice"),
    ],
)
def test_flag_given_twice(argv: list[str], words: str) -> None:
    refused(runner.invoke(app, argv), words)


def test_repeatable_options_and_values_that_look_like_options() -> None:
    # --set is repeatable by design; a value is a value even when it starts with a dash
    r = runner.invoke(app, ["admit", "--ctx", "8K", "-s", "dcp=8", "-s", "tp=8"])
    assert r.exit_code == 0, r.output
    refused(runner.invoke(app, ["admit", "--ctx", "8K", "--set", "--ctx"]), "--set '--ctx'")


@pytest.mark.parametrize(
    ("extra", "option", "needs"),
    [
        (["--link", "100Gbps"], "--link", "--pd"),
        (["--prefill-tps", "5000"], "--prefill-tps", "--trace"),
        (["--tpot-ms", "30"], "--tpot-ms", "--trace"),
        (["--trace-format", "mooncake"], "--trace-format", "--trace"),
    ],
)
def test_option_without_effect(extra: list[str], option: str, needs: str) -> None:
    refused(runner.invoke(app, [*FIT, "--require-ctx", "128K", *extra]), f"{option} has no effect without {needs}")


def test_link_with_pd_is_read() -> None:
    r = runner.invoke(app, [*FIT, "--require-ctx", "128K", "--pd", "--link", "100Gbps"])
    assert r.exit_code in (0, 1), r.output


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "1K", "0", "0MiB", "12 parsecs", "99999999999999999"])
def test_env_limit_refused(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_MAX_CONFIG_BYTES", value)
    with pytest.raises(LimitError, match="KVPLAN_MAX_CONFIG_BYTES"):
        CONFIG.effective()
    refused(runner.invoke(app, ["admit", "--ctx", "8K"]), "KVPLAN_MAX_CONFIG_BYTES")


@pytest.mark.parametrize(("value", "size"), [("4096", 4096), ("8MiB", 8 << 20), ("2 GB", 2 * 10**9), ("", 4 << 20)])
def test_env_limit_read(value: str, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_MAX_CONFIG_BYTES", value)
    assert CONFIG.effective() == size  # "" is unset: the 4 MiB default


def test_env_limit_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = tmp_path / "d.yaml"
    deploy.write_text("schema_version: 1\nmodel: glm-5.3\nengine: sglang\ngpu: h200\ntp: 8\n")
    monkeypatch.setenv("KVPLAN_MAX_CONFIG_BYTES", "16B")
    refused(runner.invoke(app, ["admit", "--ctx", "8K", "--deploy", str(deploy)]), "limit of 16 bytes")


def test_version_ascii_digits_only() -> None:
    refused(runner.invoke(app, ["admit", "--ctx", "8K", "--set", "engine_version=٠.٥.٢٣"]), "is not a version")


@pytest.mark.parametrize("versions", [["0.5.9", ""], ["", "0.5.9"], ["0.5.9", "  "]])
def test_diff_empty_version_refused(versions: list[str]) -> None:
    r = runner.invoke(app, ["diff", "--engine-version", *versions, "glm-5.3-8xh200-sglang"])
    refused(r, "empty")


def test_gate_empty_version_refused() -> None:
    refused(runner.invoke(app, ["gate", "--against-version", "", "glm-5.3-8xh200-sglang"]), "empty")


AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,100,20\n2023-11-16 18:17:04.00,100,20\n"


@pytest.mark.parametrize(
    ("extra", "option", "needs"),
    [
        (["--points", "5"], "--points", "--sweep"),
        (["-j", "2"], "--jobs", "--sweep"),
        (["--prefill-tps", "5000"], "--prefill-tps", "--occupancy"),
        (["--tpot-ms", "5"], "--tpot-ms", "--occupancy"),
        (["--max-running", "5"], "--max-running", "--occupancy"),
    ],
)
def test_simulate_option_without_effect(tmp_path: Path, extra: list[str], option: str, needs: str) -> None:
    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    r = runner.invoke(app, ["simulate", str(trace), "--semantics", "sglang", *extra])
    refused(r, f"{option} has no effect without {needs}")


def test_simulate_occupancy_reads_its_options(tmp_path: Path) -> None:
    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    r = runner.invoke(app, ["simulate", str(trace), "--semantics", "sglang", "--occupancy", "--tpot-ms", "5"])
    assert r.exit_code == 0, r.output
