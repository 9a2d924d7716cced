"""Run (name, budget in seconds, callable) cases one after another and print each time against its budget: the
input-limit benchmarks' shared loop (input_limits.py, quant_limits.py)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence


def run_cases(doc: str, cases: Sequence[tuple[str, float, Callable[[], object]]], width: int) -> int:
    """Exit status: 1 under --check when a case takes its budget or more."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a case takes its budget or more")
    args = ap.parse_args()
    slow = 0
    for name, budget, run in cases:
        start = time.perf_counter()
        run()
        took = time.perf_counter() - start
        slow += took >= budget
        print(f"{name:<{width}} {took:8.3f} s  (budget {budget:g} s)")
    return 1 if args.check and slow else 0
