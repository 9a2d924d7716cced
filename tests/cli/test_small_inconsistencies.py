"""Issue 25 "Small inconsistencies": the same rule for the same kind of value, wherever it is typed.

Each case was accepted before (exit 0, or exit 0 in one spelling and 2 in another); now one line and exit 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.units import parse_bytes

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
FORTY_DIGITS = "1234567890" * 4


def refused(r: Result, *words: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("kvplan: error: "), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.mark.parametrize("option", ["--batch", "--mtp"])
def test_workspace_counts_bounded_as_ctx_is(option: str) -> None:
    # --ctx refuses 40 digits (limits.MAX_INT_DIGITS); --batch / --mtp planned them (exit 1)
    refused(runner.invoke(app, ["workspace", "--ctx", "8K", option, FORTY_DIGITS]), option, "largest value")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_prefix_sweep_zero_refused_as_negative_is(n: str) -> None:
    refused(runner.invoke(app, ["prefix", "--ctx", "128K", "--hit", "64K", "--sweep", n]), "--sweep must be positive")


def test_prefix_without_sweep_still_answers() -> None:
    assert runner.invoke(app, ["prefix", "--ctx", "128K", "--hit", "64K"]).exit_code == 0


@pytest.mark.parametrize("ctx", [["--ctx", "1M"], []])  # without --ctx: the deployment's context length, 1M
@pytest.mark.parametrize("model", [[], ["--model", "glm-5.3"]])
def test_doctor_hit_longer_than_ctx_with_or_without_model(model: list[str], ctx: list[str]) -> None:
    log = str(LOGS / "sglang-0.5.23-glm53-match.log")
    r = runner.invoke(app, ["doctor", "--log", log, "--hit", "2M", *ctx, *model])
    refused(r, "--hit 2,097,152 is longer than --ctx 1,048,576")


@pytest.mark.parametrize("text", ["0.5B", "1.5 B", "0.0000000001GB"])
def test_fraction_of_a_byte_refused(text: str) -> None:
    with pytest.raises(InputError, match="not a whole number of bytes"):
        parse_bytes(text)


def test_whole_byte_sizes_unchanged() -> None:
    # 1.5 KiB = 1,536 B exactly; 94.46 GiB (a log's two decimals) truncates to whole bytes as before
    assert parse_bytes("1.5 KiB") == 1536 and parse_bytes("0B") == 0
    assert parse_bytes("94.46GiB") == 9446 * (1 << 30) // 100


def test_vllm_non_kv_other_half_a_byte() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "8K", "--deploy", "glm-5.3-8xh200-vllm", "--set", "non_kv_other=0.5B"])
    refused(r, "non_kv_other", "not a whole number of bytes")


def test_custom_gpu_with_sm_and_gfx(tmp_path: Path) -> None:
    deploy = tmp_path / "d.yaml"
    deploy.write_text(
        "schema_version: 1\nmodel: glm-5.3\nengine: sglang\ntp: 8\n"
        "gpu:\n  name: X\n  nvml_total: 141GiB\n  sm: 90\n  gfx: gfx942\n"
    )
    refused(runner.invoke(app, ["admit", "--ctx", "8K", "--deploy", str(deploy)]), f"{deploy}:9: gpu.gfx")


@pytest.mark.parametrize("semantics", ["sglang", "vllm"])
def test_azure_row_with_more_fields_than_the_header(tmp_path: Path, semantics: str) -> None:
    trace = tmp_path / "azure.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,100,20,7\n2023-11-16 18:17:04.00,100,20\n"
    )
    r = runner.invoke(app, ["simulate", str(trace), "--semantics", semantics])
    refused(r, f"{trace}:2: expected 3 columns")
    # --skip-bad skips and counts it, as every malformed record
    assert runner.invoke(app, ["simulate", str(trace), "--semantics", semantics, "--skip-bad"]).exit_code == 0
