"""`kvplan simulate` at fleet scale: CPU seconds and peak memory per mode as the trace grows k-fold.

The trace (the Mooncake conversation trace by default) is repeated k times into a temporary directory, each copy's
hash ids offset past the previous copy's largest id (so copies share no block) and its timestamps past the
previous copy's last arrival (so occupancy mode sees copies one after another). With ``--ids hashed`` every id
is then renamed to a 64-bit-looking value of at least 2**32 (``x * odd mod 2**62 + 2**32``, one to one), as an
engine's block hashes would be: the hits must not change, and neither may the memory (kvplan maps ids to dense
integers as it reads). Every mode × size × id kind runs as its own child process (``python -m kvplan simulate
... --format json``), under benchmarks/_child.py: its CPU seconds (user + system, with the processes it waited
for) and its own peak resident memory (not this script's, which a forked child's ``ru_maxrss`` would include).
A run past ``--timeout`` seconds (wall) is killed and reported as "> N s".

Modes (capacity 3M tokens, one process: ``-j 1``):

- ``ideal``: one capacity, leaf-LRU over the trace's own 512-token blocks, the last 50 % of requests measured
  (kvcache-simulator's convention: it reports nothing for a pool that did not fill before its window);
- ``sweep``: the 10-point leaf-LRU curve (400 to 100,000 blocks, log-spaced; the curve of
  sim_vs_kvcache_simulator.py), last 50 %;
- ``sweep-range``: the default sweep a user types, ``--sweep 200K..50M`` (tokens; ``--points`` and ``-j`` left
  at their defaults), last 50 %;
- ``fifo``: the same 10 points under block FIFO, last 50 %;
- ``sglang``, ``vllm``: the engine pools in order mode (64-token pages, the GLM-5.3 presets' pages), all
  requests measured;
- ``sglang-occ``, ``vllm-occ``: the engine pools in occupancy mode (trace arrivals, the default service model).

With ``--peer`` the ideal modes are also run by kvcache-simulator's C++ backend (``run_cpp_sweep`` in a child
process, trace parsing included, its one-time compile done before timing) on the same k-fold trace, and the
hit tokens of the two compared. Leaf-LRU is a stack algorithm, so a copy's hits do not depend on the copies
before it: for an even k the last-50 % hit tokens of ``ideal`` and ``sweep`` are checked to be exactly k/2 × those
of one copy measured whole (a reference run with ``--window all``, not in the table); with copies 1 in the run,
the engine order modes (every request measured) are checked to hit exactly k × one copy.

    python benchmarks/sim_scale.py                          # copies 1,16,64, every mode
    python benchmarks/sim_scale.py --copies 1,16 --modes vllm,sglang --timeout 120
    python benchmarks/sim_scale.py --copies 64 --peer --json results.json
    python benchmarks/sim_scale.py --compare before.json    # same hit tokens as a saved run? CPU and RSS before/after
    python benchmarks/sim_scale.py --copies 8,64 --ids dense,hashed --check   # issue 31's targets

Targets (issue 31, verbatim; ``--check`` exits 1 when one measured here is missed): every mode at 770K requests
under 60 s CPU and 150 MiB peak, with dense and with hashed ids; memory growth from x8 to x64 sub-linear in
requests for every mode.

Prints a markdown table (CPU s, peak MiB per mode and size) and a line naming the machine. Exit 2 when a run
fails or the peer disagrees, or when --compare finds hit tokens that changed (it also says where the rest of
the JSON output differs, by digest); 0 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import _child

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
CAPACITY = "3M"
CURVE_BLOCKS = [round(400 * (100_000 / 400) ** (i / 9)) for i in range(10)]
LAST50 = ["--window", "last50"]
MODES: dict[str, list[str]] = {
    "ideal": ["--capacity", CAPACITY, *LAST50],
    "sweep": ["--sweep", ",".join(f"{c} blocks" for c in CURVE_BLOCKS), "-j", "1", *LAST50],
    "sweep-range": ["--sweep", "200K..50M", *LAST50],
    "fifo": ["--sweep", ",".join(f"{c} blocks" for c in CURVE_BLOCKS), "--policy", "fifo", "-j", "1", *LAST50],
    "sglang": ["--semantics", "sglang", "--capacity", CAPACITY],
    "vllm": ["--semantics", "vllm", "--capacity", CAPACITY],
    "sglang-occ": ["--semantics", "sglang", "--capacity", CAPACITY, "--occupancy"],
    "vllm-occ": ["--semantics", "vllm", "--capacity", CAPACITY, "--occupancy"],
}
PEER_POLICY = {"ideal": "lru", "sweep": "lru", "fifo": "fifo"}
"""Modes the peer runs with the same capacities (sweep-range's points are kvplan's own)."""
STACK_MODES = ("ideal", "sweep", "sweep-range")
"""Modes whose hits are a stack algorithm's: a copy's hits do not depend on the copies before it."""
ENGINE_ORDER_MODES = ("sglang", "vllm")
"""Engine pools in order mode, every request measured: a copy's blocks are all new and the copy before it leaves
only blocks that are evicted first (least recently used), so k copies hit exactly k × one copy."""


CPU_LIMIT_S = 60.0
RSS_LIMIT_BYTES = 150 << 20
TARGET_REQUESTS = 770_000
"""The issue's fleet size: the 64-fold conversation trace (769,984 requests) counts as 770K."""
HASH_MULT = 0x9E3779B97F4A7C15  # odd: x -> x * HASH_MULT mod 2**62 is one to one


@dataclass
class Run:
    tool: str
    mode: str
    copies: int
    ids: str
    requests: int
    cpu_s: float
    peak_rss_bytes: int
    wall_s: float
    timed_out: bool
    rc: int
    hit_tokens: list[int]
    digest: str
    """sha256 of the JSON output without the trace path: equal digests, equal results."""


def hashed(x: int) -> int:
    return (x * HASH_MULT) % (1 << 62) + (1 << 32)


def make_trace(src: Path, copies: int, out_dir: Path, ids: str = "dense") -> tuple[Path, int]:
    """``copies`` copies of a Mooncake trace, ids and times offset per copy (ids then renamed with ``hashed`` for
    ``ids="hashed"``); returns (path, requests)."""
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    id_span = max((max(r["hash_ids"]) for r in rows if r["hash_ids"]), default=-1) + 1
    t_span = max(r.get("timestamp", 0) for r in rows) + 1
    path = out_dir / f"{src.stem}_x{copies}_{ids}.jsonl"
    with path.open("w") as f:
        for k in range(copies):
            for r in rows:
                c = dict(r)
                c["hash_ids"] = [x + k * id_span for x in r["hash_ids"]]
                if ids == "hashed":
                    c["hash_ids"] = [hashed(x) for x in c["hash_ids"]]
                if "timestamp" in c:
                    c["timestamp"] = r["timestamp"] + k * t_span
                f.write(json.dumps(c, separators=(",", ":")) + "\n")
    return path, len(rows) * copies


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def kvplan_run(
    mode: str, trace: Path, copies: int, requests: int, timeout: float, extra: tuple[str, ...] = (), ids: str = "dense"
) -> Run:
    cmd = [sys.executable, "-m", "kvplan", "simulate", str(trace), *MODES[mode], *extra, "--format", "json"]
    c = _child.run(cmd, timeout=timeout, env=_env())
    rc, text, cpu, rss, wall, timed_out = c.rc, c.out, c.cpu_s, c.peak_rss_bytes, c.wall_s, c.timed_out
    hits: list[int] = []
    digest = ""
    if rc == 0 and not timed_out:
        doc = json.loads(text)
        doc.pop("trace", None)
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
        hits = [p["hit_tokens"] for p in doc["points"]] if "points" in doc else [doc["hit"]["tokens"]]
    return Run("kvplan", mode, copies, ids, requests, cpu, rss, wall, timed_out, rc, hits, digest)


_PEER = """
import json, sys
from kvcache_sim.cpp_backend import run_cpp_sweep
from kvcache_sim.trace import parse_trace_file
caps, policy = json.loads(sys.argv[2]), sys.argv[3]
trace = parse_trace_file(sys.argv[1], block_size=512)
res = run_cpp_sweep(trace, capacities=caps, policies=[policy], warmup_requests=trace.request_count // 2)
print(json.dumps([res.results[(policy, c)].hitTokens for c in caps]))
"""


def peer_run(mode: str, trace: Path, copies: int, requests: int, timeout: float, ids: str = "dense") -> Run:
    caps = [3 * 2**20 // 512] if mode == "ideal" else CURVE_BLOCKS
    cmd = [sys.executable, "-c", _PEER, str(trace), json.dumps(caps), PEER_POLICY[mode]]
    c = _child.run(cmd, timeout=timeout)
    hits = json.loads(c.out) if c.ok else []
    return Run(
        "kvcache-simulator C++", mode, copies, ids, requests, c.cpu_s, c.peak_rss_bytes, c.wall_s, c.timed_out,
        c.rc, hits, "",
    )  # fmt: skip


def cell(r: Run, timeout: float) -> str:
    if r.timed_out:
        return f"> {timeout:g} s"
    if r.rc:
        return f"exit {r.rc}"
    return f"{r.cpu_s:.1f} s, {r.peak_rss_bytes / 2**20:,.0f} MiB"


def check_targets(runs: list[Run], modes: list[str]) -> dict[str, bool | None]:
    """The issue's goals on the kvplan runs measured here (None: a size this run did not measure)."""
    ours = [r for r in runs if r.tool == "kvplan"]
    big = [r for r in ours if r.requests >= TARGET_REQUESTS - 1000]
    out: dict[str, bool | None] = {}
    for ids in ("dense", "hashed"):
        got = [r for r in big if r.ids == ids]
        cpu = [r.cpu_s < CPU_LIMIT_S and r.rc == 0 and not r.timed_out for r in got]
        rss = [r.peak_rss_bytes < RSS_LIMIT_BYTES and r.rc == 0 and not r.timed_out for r in got]
        full = {r.mode for r in got} >= set(modes)
        out[f"every mode at 770K requests under 60 s CPU, {ids} ids"] = all(cpu) if full else None
        out[f"every mode at 770K requests under 150 MiB peak, {ids} ids"] = all(rss) if full else None
    growth: list[bool] = []
    for r64 in (r for r in ours if r.copies == 64):
        r8 = [r for r in ours if r.copies == 8 and r.mode == r64.mode and r.ids == r64.ids]
        if r8 and r8[0].peak_rss_bytes and r64.peak_rss_bytes:
            growth.append(r64.peak_rss_bytes / r8[0].peak_rss_bytes < r64.requests / r8[0].requests)
    out["memory growth from x8 to x64 sub-linear in requests for every mode"] = all(growth) if growth else None
    return out


def run_all(args: argparse.Namespace, copies: list[int], modes: list[str], kinds: list[str]) -> tuple[list[Run], bool]:
    runs: list[Run] = []
    one: dict[str, list[int]] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="kvplan-sim-scale-") as tmp:
        for k in copies:
            for ids in kinds:
                path, n = make_trace(args.trace, k, Path(tmp), ids)
                for mode in modes:
                    r = kvplan_run(mode, path, k, n, args.timeout, ids=ids)
                    runs.append(r)
                    print(f"  {mode} x{k} {ids} ({n:,} requests): {cell(r, args.timeout)}", file=sys.stderr, flush=True)
                    failed |= bool(r.rc) and not r.timed_out
                    if args.peer and mode in PEER_POLICY:
                        p = peer_run(mode, path, k, n, args.timeout, ids)
                        runs.append(p)
                        print(f"  peer {mode} x{k} {ids}: {cell(p, args.timeout)}", file=sys.stderr, flush=True)
                        if p.hit_tokens and r.hit_tokens and p.hit_tokens != r.hit_tokens:
                            print(f"DISAGREE {mode} x{k}: kvplan {r.hit_tokens} peer {p.hit_tokens}", file=sys.stderr)
                            failed = True
                if k == 1 and ids == "dense":
                    # one copy measured whole: k copies of a stack algorithm hit k/2 times that in their last half
                    for mode in (m for m in modes if m in STACK_MODES):
                        ref = kvplan_run(mode, path, k, n, args.timeout, ("--window", "all"))
                        one[mode] = ref.hit_tokens
                    for r in runs:
                        if r.copies == 1 and r.mode in ENGINE_ORDER_MODES and r.tool == "kvplan":
                            one[r.mode] = r.hit_tokens
                os.unlink(path)
    for r in runs:
        if r.tool != "kvplan" or r.ids != "hashed":
            continue
        twin = [d for d in runs if d.tool == "kvplan" and d.ids == "dense" and (d.mode, d.copies) == (r.mode, r.copies)]
        if twin and twin[0].hit_tokens and r.hit_tokens and twin[0].hit_tokens != r.hit_tokens:
            print(
                f"HASHED IDS CHANGED HITS: {r.mode} x{r.copies}: {twin[0].hit_tokens} -> {r.hit_tokens}",
                file=sys.stderr,
            )
            failed = True
    for r in runs:
        if r.tool != "kvplan" or r.copies == 1 or not one.get(r.mode) or not r.hit_tokens:
            continue
        if r.mode in STACK_MODES and r.copies % 2 == 0:
            times, num = f"{r.copies // 2}", r.copies // 2  # last 50 % of k copies: k/2 whole copies
        elif r.mode in ENGINE_ORDER_MODES:
            times, num = f"{r.copies}", r.copies
        else:
            continue
        if r.hit_tokens != [h * num for h in one[r.mode]]:
            print(f"NOT {times} x ONE COPY: {r.mode} x{r.copies}: {r.hit_tokens} vs {one[r.mode]}", file=sys.stderr)
            failed = True
        else:
            print(f"  {r.mode} x{r.copies} {r.ids}: hit tokens exactly {times} x one copy", file=sys.stderr)
    return runs, failed


def print_table(runs: list[Run], modes: list[str], timeout: float) -> None:
    sizes = sorted({(r.copies, r.requests) for r in runs})
    head = "| mode | ids | " + " | ".join(f"{n:,} requests (x{k})" for k, n in sizes) + " |"
    print(head)
    print("|---" * (len(sizes) + 2) + "|")
    for tool in dict.fromkeys(r.tool for r in runs):
        for mode in modes:
            for ids in dict.fromkeys(r.ids for r in runs):
                cells = []
                for k, _ in sizes:
                    hit = [r for r in runs if r.tool == tool and r.mode == mode and r.copies == k and r.ids == ids]
                    cells.append(cell(hit[0], timeout) if hit else "")
                if any(cells):
                    name = f"`{mode}`" if tool == "kvplan" else f"`{mode}`, {tool}"
                    print(f"| {name} | {ids} | " + " | ".join(cells) + " |")
    print(f"\nCPU seconds (user + system) and the child's own peak RSS; machine: {_child.machine()}")


def compare(path: Path, runs: list[Run]) -> int:
    changed = 0
    before = {
        (d["tool"], d["mode"], d["copies"], d.get("ids", "dense")): d for d in json.loads(path.read_text())["runs"]
    }
    for r in runs:
        b = before.get((r.tool, r.mode, r.copies, r.ids))
        if not b or not b.get("hit_tokens") or not r.hit_tokens:
            continue
        if b["hit_tokens"] != r.hit_tokens:
            print(f"CHANGED HITS: {r.mode} x{r.copies}: {b['hit_tokens']} -> {r.hit_tokens}", file=sys.stderr)
            changed += 1
            continue
        cpu = f"{b['cpu_s']:.1f} -> {r.cpu_s:.1f} s CPU"
        rss = f"{b['peak_rss_bytes'] / 2**20:,.0f} -> {r.peak_rss_bytes / 2**20:,.0f} MiB"
        out = "same output" if b.get("digest") == r.digest else "output differs elsewhere (digest)"
        print(f"same hit tokens: {r.mode} x{r.copies} {r.ids}: {cpu}, {rss}; {out}", file=sys.stderr)
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--copies", default="1,16,64", help="comma list of k (default 1,16,64)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)}")
    ap.add_argument("--ids", default="dense,hashed", help="comma list of dense, hashed (default both)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds (wall) a run may take (default 300)")
    ap.add_argument("--peer", action="store_true", help="also run kvcache-simulator's C++ backend (ideal modes)")
    ap.add_argument("--json", type=Path, help="write every run's figures to this file")
    ap.add_argument("--compare", type=Path, help="a --json file of an earlier run: report outputs that changed")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target measured here is missed")
    args = ap.parse_args()
    if not args.trace.is_file():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 2
    copies = [int(x) for x in args.copies.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    kinds = [x.strip() for x in args.ids.split(",") if x.strip()]
    unknown = [m for m in modes if m not in MODES] + [x for x in kinds if x not in ("dense", "hashed")]
    if unknown or not copies or min(copies) < 1 or not kinds:
        print(f"unknown mode(s) or id kind(s) {unknown} or bad --copies {args.copies!r}", file=sys.stderr)
        return 2
    if args.peer:
        from kvcache_sim.cpp_backend import ensure_cpp_simulator

        ensure_cpp_simulator()
    runs, failed = run_all(args, copies, modes, kinds)
    print_table(runs, modes, args.timeout)
    targets = check_targets(runs, modes)
    for name, met in targets.items():
        print(f"  {'not run' if met is None else 'met ' if met else 'MISS'} {name}")
    changed = compare(args.compare, runs) if args.compare is not None else 0
    if args.json is not None:
        doc: dict[str, Any] = {
            "machine": _child.machine(), "trace": str(args.trace), "runs": [asdict(r) for r in runs],
            "targets": targets,
        }  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if failed or changed:
        return 2
    return 1 if args.check and False in targets.values() else 0


if __name__ == "__main__":
    sys.exit(main())
