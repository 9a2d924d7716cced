"""Speed of the weights readers on hostile configs (moved out of tests/fuzz/test_quant.py, issue 26: no test
asserts a wall-clock time): 100,000 layers, 282 exact ignore names, the catastrophic regexes refused by shape,
one process, one core.

    python benchmarks/quant_limits.py           # prints the seconds of each case; exit 0
    python benchmarks/quant_limits.py --check   # exit 1 if a case takes its budget or more
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from _budgets import run_cases

from kvplan.errors import ConfigError
from kvplan.models.weights import param_groups_from_hf
from tests.fuzz.test_quant import GQA, MLA, QUANT


def _refused(pattern: str) -> None:
    try:
        param_groups_from_hf({**GQA, "quantization_config": {**QUANT[-1], "ignore": [pattern]}}, "m/config.json")
    except ConfigError:
        return
    raise AssertionError(f"{pattern} was not refused")


CASES: list[tuple[str, float, Callable[[], object]]] = [
    ("100,000 MLA layers", 5.0, lambda: param_groups_from_hf({**MLA, "num_hidden_layers": 100_000}, "m")),
    (
        "282 exact ignore names",
        0.5,
        lambda: param_groups_from_hf(
            {**GQA, "quantization_config": {**QUANT[-1], "ignore": [f"model.layers.{i}.mlp.gate" for i in range(282)]}},
            "m",
        ),
    ),
    ("re:(.*.*)*x refused", 0.5, lambda: _refused("re:(.*.*)*x")),
    ("re:(a|aa)+$ refused", 0.5, lambda: _refused("re:(a|aa)+$")),
]


def main() -> int:
    return run_cases(__doc__ or "", CASES, 28)


if __name__ == "__main__":
    sys.exit(main())
