"""`kvplan perf` as users run it: whole processes (start-up, loading the model, the closed loop, printing), on a
terminal (a pty: rich draws the table) and off one (a pipe), CPU seconds per run. Issue 30 asks under a second
for a closed-loop point on one core; `kvplan admit --ctx 1M` runs beside them as the yardstick.

Every command runs once untimed (page cache, .pyc files), then in interleaved rounds (each command once a round,
both outputs), so that other users' load hits all alike. With ``--against DIR`` (another checkout, e.g.
``git worktree add /tmp/base REV``) each perf point also runs from DIR in the same rounds and the ratio
DIR / this checkout is taken per round, min / median / max.

    PYTHONPATH=. python benchmarks/perf_process.py [--rounds 5] [--against DIR] [--check]   # --check: exit 1
                                                          # when a closed-loop point's median is 1 CPU second or more
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import _child

ROOT = Path(__file__).resolve().parents[1]
POINTS = {
    "perf GLM-5.3 8xH200 SGLang 8K/1K x 64": ["perf", "--isl", "8K", "--osl", "1K", "--concurrency", "64"],
    "perf DeepSeek-R1 8xB200 SGLang 1K/8K x 512": [
        "perf", "-d", str(ROOT / "benchmarks/published/deployments/sgl-cookbook-dsr1-8xb200-sglang.yaml"),
        "--isl", "1K", "--osl", "8K", "--concurrency", "512",
    ],
}  # fmt: skip
"""The default deployment's everyday point and the heaviest closed loop perf_speed.py times (512 clients queued)."""
YARDSTICK = {"admit --ctx 1M": ["admit", "--ctx", "1M"]}
ADMIT_OK = (0, 1)  # admitted or rejected: both a complete run


def _env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # modules load from __pycache__ as in an installed copy
    env.pop("KVPLAN_FORMAT", None)
    env["PYTHONPATH"] = str(checkout)
    return env


def _run(checkout: Path, args: list[str], pty: bool, ok: tuple[int, ...]) -> _child.Child:
    # -P: the working directory is not put first on sys.path, so PYTHONPATH's checkout is the kvplan that runs
    c = _child.run([sys.executable, "-P", "-m", "kvplan", *args], env=_env(checkout), pty=pty, ok=ok, timeout=120)
    if not c.ok:
        sys.stderr.write(f"{checkout}: kvplan {' '.join(args)}: exit {c.rc}\n{c.out.decode(errors='replace')[-800:]}")
        raise SystemExit(2)
    return c


def measure(rounds: int, against: Path | None) -> dict[tuple[str, str, str], list[_child.Child]]:
    """(checkout label, output, command) -> each round's run."""
    jobs = [("this", ROOT, label, args, (0,)) for label, args in POINTS.items()]
    jobs += [("this", ROOT, label, args, ADMIT_OK) for label, args in YARDSTICK.items()]
    if against is not None:
        jobs += [("against", against, label, args, (0,)) for label, args in POINTS.items()]
    out: dict[tuple[str, str, str], list[_child.Child]] = {}
    for warm in (True, False):
        for _ in range(1 if warm else rounds):
            for where in ("terminal", "pipe"):
                for who, checkout, label, args, ok in jobs:
                    c = _run(checkout, args, where == "terminal", ok)
                    if not warm:
                        out.setdefault((who, where, label), []).append(c)
    return out


def report(runs: dict[tuple[str, str, str], list[_child.Child]], rounds: int, against: Path | None) -> bool:
    print(f"{rounds} interleaved rounds; {_child.machine()}")
    print("CPU seconds a whole process (user + system), min / median / max:")
    for (who, where, label), cs in runs.items():
        s = _child.spread([c.cpu_s for c in cs])
        name = f"{label} ({against})" if who == "against" else label
        print(f"  {where:8} {name}: {s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f} s")
    if against is not None:
        print(f"ratio {against} / this checkout, per round (CPU), min / median / max:")
        for where in ("terminal", "pipe"):
            for label in POINTS:
                r = _child.pair_ratios(runs[("against", where, label)], runs[("this", where, label)])
                print(f"  {where:8} {label}: {r['min']:.2f}x / {r['median']:.2f}x / {r['max']:.2f}x")
    ours = [[c.cpu_s for c in cs] for (who, _, label), cs in runs.items() if who == "this" and label in POINTS]
    worst, slowest = max(statistics.median(xs) for xs in ours), max(max(xs) for xs in ours)
    met = worst < 1.0
    print(f"  {'met ' if met else 'MISS'} every closed-loop point under 1 CPU second at its median (worst median"
          f" {worst:.2f} s; the slowest single run {slowest:.2f} s)")  # fmt: skip
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5, at least 3)")
    parser.add_argument("--against", type=Path, help="another checkout to time in the same rounds")
    parser.add_argument("--check", action="store_true", help="exit 1 when a point's median is 1 CPU second or more")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3")
    met = report(measure(args.rounds, args.against), args.rounds, args.against)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
