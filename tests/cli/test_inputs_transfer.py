"""transfer: link speeds in bits or bytes, printed in both; the rank wording follows dcp (issue 9 items 1, 9)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def _json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["transfer", "--ctx", "1M", "-f", "json", *args])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(
    ("link", "bytes_per_s"),
    [
        ("400Gb/s", 50_000_000_000),  # 400 × 10^9 bits / 8; the old parser read it as 400 GB/s
        ("400GBps", 400_000_000_000),  # bytes per second; the old parser read it as bits (50 GB/s)
    ],
)
def test_link_unit_case_decides_bits_or_bytes(link: str, bytes_per_s: int) -> None:
    data = _json("--link", link)
    assert data["link_bytes_per_s"] == bytes_per_s
    assert data["link_bits_per_s"] == bytes_per_s * 8


def test_link_speed_printed_in_both_units() -> None:
    result = runner.invoke(app, ["transfer", "--ctx", "1M", "--link", "400Gbps"])
    assert result.exit_code == 0, result.output
    # 400 Gb/s = 400e9 / 8 = 50e9 B/s
    assert "400 Gb/s = 50 GB/s" in result.stdout


def test_ambiguous_link_is_exit_2_saying_so() -> None:
    result = runner.invoke(app, ["transfer", "--ctx", "1M", "--link", "400gb/s"])
    assert result.exit_code == 2
    assert "ambiguous" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_wording_follows_dcp() -> None:
    plain = runner.invoke(app, ["transfer", "--ctx", "1M"])
    assert "TP replicates the MLA latent" in " ".join(plain.stdout.split())
    split = runner.invoke(app, ["transfer", "--ctx", "1M", "--set", "dcp=8", "-f", "json"])
    data = json.loads(split.stdout)
    assert data["copies_per_token"] == 1  # tp 8 / dcp 8: each token on one rank
    table = runner.invoke(app, ["transfer", "--ctx", "1M", "--set", "dcp=8"])
    text = " ".join(table.stdout.split())
    assert "TP replicates" not in text  # regression: the old report said so under dcp too
    assert "dcp 8 splits the tokens across 8 ranks" in text
    two = runner.invoke(app, ["transfer", "--ctx", "1M", "--set", "dcp=2", "-f", "json"])
    assert json.loads(two.stdout)["copies_per_token"] == 4  # tp 8 / dcp 2
