"""The 10-point FIFO curve in process: ``ideal.fifo_curve`` timed on a trace parsed beforehand, against other
revisions of it.

``kvplan simulate --sweep ... --policy fifo`` spends its time reading the trace and in ``fifo_curve``;
sim_scale.py times the two together as whole processes. This script parses the trace once, keeps the requests in
memory, and times only the curve: the working tree's ``kvplan/sim/ideal.py`` and, for each ``--rev``, that
revision's file (``git show REV:kvplan/sim/ideal.py``, loaded as a module beside the installed kvplan). Runs are
interleaved (each round times every version once) and the minimum CPU time of ``--rounds`` rounds is kept; every
version's points (hit tokens, hit blocks, filled, filled before the window) must equal the working tree's, or
the script exits 2.

The curve is sim_scale.py's (``CURVE_BLOCKS``: 400 to 100,000 blocks, log-spaced), the last 50 % of requests
measured. Build a k-fold trace with sim_scale.py's ``make_trace``, e.g.
``python -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path; from sim_scale import
make_trace, DEFAULT_TRACE; make_trace(DEFAULT_TRACE, 16, Path('/tmp'))"``.

    python benchmarks/sim_fifo_curve.py                               # the conversation trace, this tree
    python benchmarks/sim_fifo_curve.py --trace /tmp/conversation_trace_x16.jsonl --rev HEAD~3 --rounds 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

from sim_scale import CURVE_BLOCKS, DEFAULT_TRACE, ROOT

from kvplan.sim import ideal
from kvplan.sim.ideal import Window
from kvplan.sim.trace import open_trace

Points = list[tuple[int, int, int, bool, bool]]


def load_revision(rev: str) -> types.ModuleType:
    """``kvplan/sim/ideal.py`` as it was at ``rev``, as a module of its own (it imports the installed kvplan)."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:kvplan/sim/ideal.py"], capture_output=True, text=True, check=True
    ).stdout
    mod = types.ModuleType(f"ideal_at_{rev}")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(text, f"{rev}:kvplan/sim/ideal.py", "exec"), mod.__dict__)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--rev", action="append", default=[], help="a git revision to time too (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    trace = open_trace(args.trace)
    t0 = time.process_time()
    requests = list(trace.read())
    parse_s = time.process_time() - t0
    window = Window("last50", len(requests) // 2)
    versions = {"working tree": ideal, **{rev: load_revision(rev) for rev in args.rev}}
    best = dict.fromkeys(versions, float("inf"))
    points: dict[str, Points] = {}
    for _ in range(max(args.rounds, 1)):
        for name, mod in versions.items():
            t0 = time.process_time()
            curve = mod.fifo_curve(requests, block_tokens=trace.block_tokens, capacities=CURVE_BLOCKS, window=window)
            best[name] = min(best[name], time.process_time() - t0)
            points[name] = [
                (p.capacity_units, p.hit_tokens, p.hit_units, p.filled, p.filled_before_window) for p in curve.points
            ]
    print(f"{args.trace.name}: {len(requests):,} requests, parsed in {parse_s:.2f} s CPU (not counted)")
    pairs = len(requests) * len(CURVE_BLOCKS)
    ok = True
    for name in versions:
        same = points[name] == points["working tree"]
        ok &= same
        print(
            f"  {name}: {best[name]:.3f} s CPU (min of {args.rounds}), {best[name] / pairs * 1e9:,.0f} ns a request"
            f" and capacity{'' if same else '; POINTS DIFFER from the working tree'}"
        )
    for c, tokens, blocks, _, _ in points["working tree"]:
        print(f"    {c:>7,} blocks: {tokens:>13,} hit tokens, {blocks:>10,} hit blocks")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
