"""Speed of one `kvplan perf` closed-loop point, in process, after a warm-up (the issue asks under a second on one
core). Not run by pytest: no test asserts a wall-clock time. Prints wall and CPU seconds (on a shared machine the
CPU figure is the one-core cost).

    PYTHONPATH=. python benchmarks/perf_speed.py [--check]   # --check: exit 1 at 1 CPU second or more
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
        t, cpu = time.perf_counter(), time.process_time()
        perf(plan.arch, plan, isl=isl, osl=osl, concurrency=conc)
        dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
        worst = max(worst, dcpu)
        print(f"{deploy} isl {isl} osl {osl} concurrency {conc}: {dt:.3f} s wall, {dcpu:.3f} s CPU")
    return 1 if "--check" in sys.argv and worst >= 1.0 else 0


if __name__ == "__main__":
    sys.exit(main())
