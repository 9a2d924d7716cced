"""How a weights band is printed (kvplan/models/weights_band.py ``percent``): parts per million over 10,000 is a
percent, shown to one decimal, pinned where a divisor off by one would round the other way."""

from __future__ import annotations

import pytest

from kvplan.models import weights_band as wb


@pytest.mark.parametrize(
    ("ppm", "shown"),
    [
        # 10,499 ppm = 10,499 / 10,000 = 1.0499 %: one decimal is 1.0 (over 9,999 it would be 1.05001, shown 1.1)
        (10_499, "±1.0 %"),
        # 10,500 ppm = 1.05 % (the double just above 1.05): 1.1 (over 10,001 it would be 1.04990, shown 1.0)
        (10_500, "±1.1 %"),
        # 8,023 ppm = 0.8023 %, the per-tensor band (a floor division would say 0)
        (8_023, "±0.8 %"),
    ],
)
def test_ppm_is_a_percent_to_one_decimal(ppm: int, shown: str) -> None:
    assert wb.percent(ppm) == shown


def test_each_band_says_its_percent() -> None:
    # 8,023 / 10,000 = 0.80 %, 59,769 -> 5.98 %, 21,974 -> 2.20 %, 28,272 -> 2.83 % (the rows each band names;
    # GROUPS re-derived in test_weights_band with DeepSeek-V4's load buffers counted, 41,513 -> 4.15 % before)
    shown = [b.percent for b in (wb.PER_TENSOR, wb.PER_TENSOR_DSA, wb.MXFP4, wb.GROUPS)]
    assert shown == ["±0.8 %", "±6.0 %", "±2.2 %", "±2.8 %"]
