"""Speed of one `kvplan perf` closed-loop point, in process, after a warm-up (the issue asks under a second on one
core). Not run by pytest: no test asserts a wall-clock time.

    PYTHONPATH=. python benchmarks/perf_speed.py [--check]   # --check: exit 1 at 1 s or more
"""

from __future__ import annotations

import sys
import time

from kvplan.cli._common import load_plan
from kvplan.perf.predict import perf

POINTS = (("glm-5.3-8xh200-sglang", 8192, 1024, 64), ("glm-5.3-8xh200-vllm", 1024, 8192, 128))


def main() -> int:
    worst = 0.0
    for deploy, isl, osl, conc in POINTS:
        plan = load_plan(None, deploy, [])
        perf(plan.arch, plan, isl=isl, osl=osl, concurrency=conc)  # warm-up
        t = time.perf_counter()
        perf(plan.arch, plan, isl=isl, osl=osl, concurrency=conc)
        dt = time.perf_counter() - t
        worst = max(worst, dt)
        print(f"{deploy} isl {isl} osl {osl} concurrency {conc}: {dt:.3f} s")
    return 1 if "--check" in sys.argv and worst >= 1.0 else 0


if __name__ == "__main__":
    sys.exit(main())
