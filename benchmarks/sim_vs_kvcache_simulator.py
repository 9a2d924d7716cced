"""kvplan's simulator against kvcache.ai's ``kvcache-simulator`` (its Python and C++ backends), as whole processes.

Same trace (the Mooncake conversation trace by default, 12K requests; ``--copies 1,64`` adds its 64-fold copy,
770K requests, built as sim_scale.py builds it), same semantics (trace-native 512-token blocks, leaf-LRU and
block FIFO, the last 50 % of requests measured), same capacities. Every run is a fresh process that starts from
the trace file, so interpreter start-up, imports and parsing count on both sides:

- kvplan: ``python -m kvplan simulate TRACE ... --format json`` (``-j 1``);
- the peer: ``python -c`` with its parser and its backend (the C++ backend's one-time compile is done before
  timing and reported apart).

Cases: one capacity (5,859 blocks = 3e6 tokens, the paper's "local DRAM" line), leaf-LRU; a 10-point curve
(400 to 100,000 blocks, log-spaced), leaf-LRU; the same curve under FIFO. Each case runs as rounds, the tools
interleaved within a round (kvplan, C++, [Python], kvplan, C++, ...), ``--pairs`` rounds (at least 5); a ratio
is taken per round (peer CPU seconds / kvplan CPU seconds: user + system of the process and what it waited for,
the C++ binary included; both are single-threaded, and CPU time is what the shared machine's other load
disturbs least) and reported as min / median / max, with the wall-clock ratios beside them. Peak RSS is each
child's own (benchmarks/_child.py). Hit tokens must agree at every capacity on every run (exit 2 otherwise).

Targets (issue 31, verbatim; checked on the median per-round ratio):

- FIFO curve >= 1.5x faster than the peer's C++ sweep at 12K and at 770K;
- one capacity >= 2x faster than its C++ backend at 12K and >= 10x faster than its Python backend;
- LRU curve >= 2x faster than C++ at 12K.

    python benchmarks/sim_vs_kvcache_simulator.py                   # 12K, 5 rounds
    python benchmarks/sim_vs_kvcache_simulator.py --copies 1,64 --json out.json
    python benchmarks/sim_vs_kvcache_simulator.py --check           # exit 1 when a target is missed

Needs ``pip install kvcache-simulator`` (the dev extra installs it) and a C++ compiler for its C++ backend.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _child
from sim_scale import make_trace

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
ONE = 5_859  # 3e6 tokens // 512
CURVE = [round(400 * (100_000 / 400) ** (i / 9)) for i in range(10)]
TIMEOUT_S = 600.0

_PEER = """
import json, sys
from kvcache_sim.trace import parse_trace_file
path, backend, policy, caps = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
trace = parse_trace_file(path, block_size=512)
if backend == "cpp":
    from kvcache_sim.cpp_backend import run_cpp_sweep
    res = run_cpp_sweep(trace, capacities=caps, policies=[policy], warmup_requests=trace.request_count // 2)
    hits = [res.results[(policy, c)].hitTokens for c in caps]
else:
    from kvcache_sim.plan import build_execution_plan
    from kvcache_sim.policies import simulate_policy
    plan = build_execution_plan(trace, warmup_fraction=0.5)
    hits = [simulate_policy(plan, policy, c).hitTokens for c in caps]
print(json.dumps(hits))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def kvplan_cmd(trace: Path, caps: list[int], policy: str) -> list[str]:
    base = [sys.executable, "-m", "kvplan", "simulate", str(trace), "--window", "last50", "--format", "json"]
    if len(caps) == 1:
        return [*base, "--capacity", f"{caps[0]} blocks", "--policy", policy]
    return [*base, "--sweep", ",".join(f"{c} blocks" for c in caps), "--policy", policy, "-j", "1"]


def kvplan_hits(out: bytes) -> list[int]:
    doc = json.loads(out)
    return [p["hit_tokens"] for p in doc["points"]] if "points" in doc else [doc["hit"]["tokens"]]


def peer_cmd(trace: Path, backend: str, caps: list[int], policy: str) -> list[str]:
    return [sys.executable, "-c", _PEER, str(trace), backend, policy, json.dumps(caps)]


CASES: dict[str, tuple[list[int], str, tuple[str, ...]]] = {
    "one capacity, leaf-LRU": ([ONE], "lru", ("cpp", "python")),
    "10-point curve, leaf-LRU": (CURVE, "lru", ("cpp",)),
    "10-point curve, FIFO": (CURVE, "fifo", ("cpp",)),
}
"""Case -> (capacities in blocks, policy, peer backends timed against kvplan)."""
SHORT = dict(zip(("one", "lru", "fifo"), CASES, strict=True))


def run_case(trace: Path, case: str, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    caps, policy, backends = CASES[case]
    cmds: dict[str, list[str]] = {"kvplan": kvplan_cmd(trace, caps, policy)}
    cmds.update({b: peer_cmd(trace, b, caps, policy) for b in backends})
    runs: dict[str, list[_child.Child]] = {t: [] for t in cmds}
    for i in range(rounds):
        for tool, cmd in cmds.items():
            c = _child.run(cmd, timeout=TIMEOUT_S, env=env)
            if not c.ok:
                raise SystemExit(f"{tool} failed on {case} ({trace.name}): exit {c.rc}, timed out {c.timed_out}")
            hits = kvplan_hits(c.out) if tool == "kvplan" else json.loads(c.out)
            runs[tool].append(c)
            ours = kvplan_hits(runs["kvplan"][-1].out)
            if hits != ours:
                print(f"DISAGREE on {case}: kvplan {ours}, {tool} {hits}", file=sys.stderr)
                raise SystemExit(2)
        done = ", ".join(f"{t} {runs[t][-1].cpu_s:.2f} s" for t in cmds)
        print(f"  {trace.name} {case} round {i + 1}/{rounds}: {done}", file=sys.stderr, flush=True)
    k = runs["kvplan"]
    return {
        "capacities_blocks": caps,
        "policy": policy,
        "hit_tokens": kvplan_hits(k[0].out),
        "cpu_s": {t: _child.spread([c.cpu_s for c in r]) for t, r in runs.items()},
        "wall_s": {t: _child.spread([c.wall_s for c in r]) for t, r in runs.items()},
        "peak_rss_bytes": {t: max(c.peak_rss_bytes for c in r) for t, r in runs.items()},
        "ratio_cpu": {f"{b}/kvplan": _child.pair_ratios(runs[b], k) for b in backends},
        "ratio_wall": {f"{b}/kvplan": _child.pair_ratios(runs[b], k, "wall_s") for b in backends},
    }


def targets(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, bool | None]:
    """The issue's goals, on the median per-round CPU ratio; None where the run did not measure that size."""

    def ratio(size: str, case: str, peer: str) -> float | None:
        got = results.get(size, {}).get(case)
        return None if got is None else float(got["ratio_cpu"][f"{peer}/kvplan"]["median"])

    def at_least(x: float | None, goal: float) -> bool | None:
        return None if x is None else x >= goal

    fifo, one, lru = "10-point curve, FIFO", "one capacity, leaf-LRU", "10-point curve, leaf-LRU"
    return {
        "FIFO curve >= 1.5x faster than the peer's C++ sweep at 12K": at_least(ratio("12K", fifo, "cpp"), 1.5),
        "FIFO curve >= 1.5x faster than the peer's C++ sweep at 770K": at_least(ratio("770K", fifo, "cpp"), 1.5),
        "one capacity >= 2x faster than its C++ backend at 12K": at_least(ratio("12K", one, "cpp"), 2.0),
        "one capacity >= 10x faster than its Python backend": at_least(ratio("12K", one, "python"), 10.0),
        "LRU curve >= 2x faster than C++ at 12K": at_least(ratio("12K", lru, "cpp"), 2.0),
    }


def size_label(requests: int) -> str:
    return f"{round(requests / 1000)}K"


def print_tables(figures: dict[str, Any]) -> None:
    print(f"kvcache-simulator {figures['kvcache_simulator']}; {figures['machine']}")
    print(f"{figures['rounds']} interleaved rounds a case; C++ compile {figures['cpp_compile_s']:.2f} s, not timed\n")
    print(
        "| trace | case | kvplan CPU s | peer | peer CPU s | peer / kvplan CPU (min / median / max)"
        " | wall ratio median | kvplan peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size, cases in figures["results"].items():
        for case, r in cases.items():
            for peer, q in r["ratio_cpu"].items():
                b = peer.split("/")[0]
                print(
                    f"| {size} | {case} | {r['cpu_s']['kvplan']['median']:.2f} | {'C++' if b == 'cpp' else 'Python'}"
                    f" | {r['cpu_s'][b]['median']:.2f} | {q['min']:.2f}x / **{q['median']:.2f}x** / {q['max']:.2f}x"
                    f" | {r['ratio_wall'][peer]['median']:.2f}x | {r['peak_rss_bytes']['kvplan'] / 2**20:,.0f} MiB |"
                )
    print("\nhit tokens agree at every capacity on every run: yes")
    for name, met in figures["targets"].items():
        print(f"  {'not run' if met is None else 'met ' if met else 'MISS'} {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--copies", default="1", help="comma list of k-fold copies to run (1: 12K; 64: 770K)")
    ap.add_argument("--pairs", type=int, default=5, help="interleaved rounds a case (at least 5)")
    ap.add_argument("--cases", default=",".join(SHORT), help=f"comma list of {', '.join(SHORT)}")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target measured here is missed")
    args = ap.parse_args()
    if not args.trace.is_file():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 2
    if args.pairs < 5:
        ap.error("--pairs must be at least 5")
    cases = [SHORT[c.strip()] for c in args.cases.split(",") if c.strip() in SHORT]
    try:
        import kvcache_sim
        from kvcache_sim.cpp_backend import ensure_cpp_simulator
    except ImportError:
        print("kvcache-simulator is not installed: pip install kvcache-simulator", file=sys.stderr)
        return 2
    if not shutil.which("c++"):
        print("kvcache-simulator's C++ backend needs a C++ compiler (c++)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    ensure_cpp_simulator()
    compile_s = time.perf_counter() - t0
    env = _env()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="kvplan-vs-kvc-") as tmp:
        for k in (int(x) for x in args.copies.split(",")):
            path, n = (
                (args.trace, sum(1 for x in args.trace.open() if x.strip()))
                if k == 1
                else make_trace(args.trace, k, Path(tmp))
            )
            _child.run(kvplan_cmd(path, [ONE], "lru"), env=env)  # warm-up: page cache, .pyc files
            results[size_label(n)] = {c: run_case(path, c, args.pairs, env) for c in cases}
    figures = {
        "trace": str(args.trace),
        "kvcache_simulator": kvcache_sim.__version__,
        "machine": _child.machine(),
        "rounds": args.pairs,
        "cpp_compile_s": round(compile_s, 3),
        "results": results,
        "targets": targets(results),
    }
    print_tables(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    missed = [name for name, met in figures["targets"].items() if met is False]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
