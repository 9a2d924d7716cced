"""kvplan.units: the durations, token rates and request rates fit's SLA options and perf --rate read."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.units import parse_duration_us, parse_per_s, parse_request_rate


def test_durations_in_microseconds() -> None:
    assert parse_duration_us("--x", "2s") == 2_000_000 and parse_duration_us("--x", "50ms") == 50_000
    assert parse_duration_us("--x", "0.5 s") == 500_000 and parse_duration_us("--x", "800us") == 800
    assert parse_duration_us("--x", "1min") == 60_000_000
    assert parse_duration_us("--x", "0.0001ms") == 1  # a fraction of a microsecond rounds up, never to 0
    for bad in ("2", "-1s", "0ms", "2 hours", "1e3ms"):
        with pytest.raises(InputError, match="--x"):
            parse_duration_us("--x", bad)


def test_token_and_request_rates() -> None:
    assert parse_per_s("--y", "20000tok/s") == 20_000 and parse_per_s("--y", "20K tok/s") == 20_000
    assert parse_per_s("--y", "1.5M tokens/s") == 1_500_000
    assert parse_request_rate("--rate", "2.5/s") == 2.5 and parse_request_rate("--rate", "4 req/s") == 4.0
    for bad in ("fast", "0tok/s", "20000"):
        with pytest.raises(InputError, match="--y"):
            parse_per_s("--y", bad)
    for bad in ("0/s", "2.5", "-1/s"):
        with pytest.raises(InputError, match="--rate"):
            parse_request_rate("--rate", bad)
