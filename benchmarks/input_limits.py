"""Speed of the readers on hostile input, the time budgets the tests used to assert (moved out of tests/, issue 26:
a test bounds the work done instead, tests/work.py): the log parser's patterns on 1 MiB pathological lines, 8 MB of
wrapped lines, a 1,000-layer config, a YAML base-60 integer. One process, one core.

    python benchmarks/input_limits.py           # prints the seconds of each case; exit 0
    python benchmarks/input_limits.py --check   # exit 1 if a case takes its budget or more
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _budgets import run_cases

from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model
from kvplan.models.reader import parse_text
from kvplan.runbook.parse import LogError, parse_log
from tests.runbook.test_parse_limits import PATHOLOGICAL, N, _lines, _patterns

HF = Path(__file__).resolve().parents[1] / "tests" / "data" / "hf"


def _all_patterns() -> None:
    patterns = _patterns()
    for name, cases in PATHOLOGICAL.items():
        for start, loop in cases:
            for line in _lines(start, loop):
                for _ in patterns[name].finditer(line):
                    pass
                patterns[name].fullmatch(line)


def _thousand_layers() -> None:
    c = json.loads((HF / "glm-5.3" / "config.json").read_text())
    c["num_hidden_layers"] = 1000
    c.pop("mlp_layer_types", None)
    c.pop("indexer_types", None)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps(c))
        load_model(d)


def _base_60() -> None:
    with contextlib.suppress(ConfigError):
        parse_text("tp: " + ":".join(["59"] * 20_000) + "\n", "dep.yaml")


def _wrapped() -> None:
    with contextlib.suppress(LogError):
        parse_log("INFO 03-01 12:00:00 Available KV cache memory: 10.25 GiB\n" + ("x" * 79 + "\n") * (8 * N // 80))


CASES: list[tuple[str, float, Callable[[], object]]] = [
    ("every log pattern, 1 MiB lines", 0.5 * sum(len(c) * 3 for c in PATHOLOGICAL.values()), _all_patterns),
    ("8 MB of wrapped log lines", 2.0, _wrapped),
    ("1,000-layer GLM-5.3 config", 5.0, _thousand_layers),
    ("YAML 20,000-group base-60", 5.0, _base_60),
]


def main() -> int:
    return run_cases(__doc__ or "", CASES, 32)


if __name__ == "__main__":
    sys.exit(main())
