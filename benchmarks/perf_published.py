"""`kvplan perf` against published serving measurements the coefficients were never fitted on.

Each point of benchmarks/published/points.csv names where its figures are printed (an evidence file copied verbatim
from its source, the line its result starts on, the column of a table), the deployment it ran (a deployment file
beside it, each citing the server command) and the statistic the source prints. The measured figures, the request
count, the lengths and the concurrency are read from the evidence itself: a `bench_serving` / `vllm bench serve`
result block (a block without "Max request concurrency" was sent all at once: a burst, priced as a trace of that
many arrivals at t = 0), or a published table (its load then in points.csv). Lengths drawn at random are given as
the bench command's nominal lengths and range ratio (points.csv), priced as `kvplan perf --range-ratio` prices them
(at their means, no SGLang waves); the block's own means (its totals over its requests) are printed beside them.

Prints, per point, measured against kvplan's median and band, and per source the MAPE of TTFT, TPOT and output
tokens/s per GPU and how many measured figures fall inside kvplan's band. A source that prints means is compared
with kvplan's medians (said on its line).

Usage: PYTHONPATH=. python benchmarks/perf_published.py   (about a minute)
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from kvplan.cli._common import load_plan
from kvplan.perf.coeffs import borrow_kind
from kvplan.perf.predict import PerfResult, mean_length, perf
from kvplan.perf.trace_loop import Arrival, TraceLoad

HERE = Path(__file__).resolve().parent / "published"
BLOCK_START = "Serving Benchmark Result"
STAT_KEYS = {
    "median": ("Median TTFT (ms)", "Median TPOT (ms)"),
    "mean": ("Mean TTFT (ms)", "Mean TPOT (ms)"),
}


@dataclass(frozen=True, kw_only=True)
class Point:
    id: str
    source: str
    deployment: str
    isl: int
    osl: int
    range_ratio: float
    """Lengths uniform in [ratio × L, L] (SGLang bench_serving --random-range-ratio); 1: fixed."""
    seen: str
    """The block's own mean lengths (its totals over its requests), or '' for a table."""
    concurrency: int
    """Closed-loop clients; 0: a burst of ``prompts`` requests at once."""
    prompts: int
    stat: str
    ttft_ms: float
    tpot_ms: float
    out_tok_s: float
    """Output tokens a second for the whole deployment, or per GPU where ``per_gpu``."""
    per_gpu: bool
    acceptance: float | None = None
    """Speculative decoding's acceptance length the block printed ("Accept length"), given to perf as measured."""


def _block(lines: list[str], at: int, where: str) -> dict[str, str]:
    """`key: value` lines of the result block whose title is on line ``at`` (1-based), to its closing rule."""
    if BLOCK_START not in lines[at - 1]:
        raise SystemExit(f"{where}: line {at} is not a result block's title ({BLOCK_START!r})")
    out: dict[str, str] = {}
    for line in lines[at:]:
        text = line.strip()
        if text.startswith("=====") or not text:
            break
        key, sep, value = text.partition(":")
        if sep and value.strip():
            out[key.strip()] = value.strip()
    return out


def _table(lines: list[str], at: int, column: str, where: str) -> dict[str, str]:
    """The cells of one column of the markdown table whose header is on line ``at``, keyed by the row's first cell
    (bold marks dropped)."""

    def cells(line: str) -> list[str]:
        return [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]

    head = cells(lines[at - 1])
    if column not in head:
        raise SystemExit(f"{where}: line {at} has no column {column!r} (columns: {', '.join(head)})")
    i = head.index(column)
    out = {}
    for line in lines[at + 1 :]:  # the row after the header is the alignment rule
        if not line.startswith("|"):
            break
        row = cells(line)
        out[row[0]] = row[i]
    return out


def _check_command(lines: list[str], at: int, lengths: tuple[str, str], where: str) -> None:
    """The bench command printed just above a block, where there is one, names the lengths points.csv gives."""
    above = " ".join(lines[max(at - 16, 0) : at - 1])
    for flag, want in zip(("--random-input-len", "--random-output-len"), lengths, strict=True):
        said = above.split(flag, 1)[1].split()[0] if flag in above else want
        if said != want:
            raise SystemExit(f"{where}: its command says {flag} {said}, points.csv {want}")


def load_points() -> list[Point]:
    points = []
    with open(HERE / "points.csv", encoding="utf-8") as f:
        for n, x in enumerate(csv.DictReader(f), start=2):
            where = f"points.csv line {n} ({x['point']}): {x['evidence']}"
            lines = (HERE / x["evidence"]).read_text(encoding="utf-8").splitlines()
            ttft_key, tpot_key = STAT_KEYS[x["stat"]]
            seen, accept = "", None
            if x["column"]:
                got = _table(lines, int(x["line"]), x["column"], where)
                conc = int(x["load"].split()[1])
                out, per_gpu, prompts = float(got["Output tput/GPU (tok/s)"]), True, 10 * conc
            else:
                got = _block(lines, int(x["line"]), where)
                prompts = int(got["Successful requests"])
                means = (round(int(got[k]) / prompts) for k in ("Total input tokens", "Total generated tokens"))
                seen = "{}/{}".format(*means)
                conc = int(got.get("Max request concurrency", 0))  # none printed: every request sent at once
                out, per_gpu = float(got["Output token throughput (tok/s)"]), False
                accept = float(got["Accept length"]) if "Accept length" in got else None
            isl, osl = seen.split("/") if x["isl_osl"] == "totals" else x["isl_osl"].split("/")
            _check_command(lines, int(x["line"]), (isl, osl), where)
            points.append(Point(id=x["point"], source=x["evidence"], deployment=x["deployment"], isl=int(isl),
                                osl=int(osl), range_ratio=float(x["range_ratio"]), seen=seen, concurrency=conc,
                                prompts=prompts, stat=x["stat"], ttft_ms=float(got[ttft_key]),
                                tpot_ms=float(got[tpot_key]), out_tok_s=out, per_gpu=per_gpu,
                                acceptance=accept))  # fmt: skip
    return points


def predict(p: Point) -> PerfResult:
    plan = load_plan(None, str(HERE / "deployments" / f"{p.deployment}.yaml"), [])
    if p.concurrency:
        return perf(plan.arch, plan, isl=p.isl, osl=p.osl, concurrency=p.concurrency, range_ratio=p.range_ratio,
                    acceptance_length=p.acceptance)  # fmt: skip
    burst = TraceLoad(arrivals=tuple(Arrival(0, p.isl, p.osl, p.id) for _ in range(p.prompts)),
                      source=f"{p.prompts} requests at once")  # fmt: skip
    return perf(plan.arch, plan, isl=p.isl, osl=p.osl, trace=burst)


AIC_MODEL = {"deepseek-v3": ("deepseek-ai/DeepSeek-R1", "fp8", "fp8_block"),
             "kimi-k2.5": ("moonshotai/Kimi-K2.5", "int4_wo", "int4_wo")}  # fmt: skip
"""The checkpoint AIConfigurator's model_configs/ name for each published point's model (it reads no Hub offline),
with its GEMM and MoE quant modes as the silicon_sample.csv rows of that checkpoint write them."""


@dataclass(frozen=True)
class Priced:
    point: Point
    key: str
    """The source, engine and version, the statistic and whether the row was borrowed: one line of the summary."""
    kind: str
    """What the row borrowed (coeffs.borrow_kind), 'own row' for none."""
    measured: tuple[float, ...]
    predicted: tuple[float, ...]
    inside: tuple[bool, ...]
    gpus: int
    osl: int
    """The output length priced (a range ratio's mean)."""
    line: str


def price(p: Point) -> Priced:
    r = predict(p)
    meas = (p.ttft_ms, p.tpot_ms, p.out_tok_s if p.per_gpu else p.out_tok_s / r.gpus)
    bands = (r.us["ttft"], r.us["tpot"], r.tokens_per_s_per_gpu["output"])
    scale = (1e-3, 1e-3, 1.0)  # µs → ms for the latencies
    pred = tuple(b.value * s for b, s in zip(bands, scale, strict=True))
    inside = tuple(b.low * s <= m <= b.high * s for b, s, m in zip(bands, scale, meas, strict=True))
    cells = [f"{m:,.1f} / {k:,.1f} [{b.low * s:,.0f}-{b.high * s:,.0f}]{'' if ok else ' out'}"
             for m, k, b, s, ok in zip(meas, pred, bands, scale, inside, strict=True)]  # fmt: skip
    load = f"c{p.concurrency}" if p.concurrency else f"burst {p.prompts}"
    lengths = f"{r.isl}/{r.osl}" + (f" ({p.seen})" if p.seen and p.range_ratio < 1 else "")
    key = f"{p.source} ({r.engine} {r.engine_version}, {p.stat}s{', borrowed' if r.borrowed else ''})"
    kind = "speculative" if r.acceptance else borrow_kind(r.borrowed) or "own row"  # coeffs.WORST_SPECULATIVE
    return Priced(point=p, key=key, kind=kind, measured=meas, predicted=pred,
                  inside=inside, gpus=r.gpus, osl=r.osl,
                  line=f"{p.id:<5} {load:<11} {lengths:<22} {cells[0]:<36} {cells[1]:<32} {cells[2]}")  # fmt: skip


def _mape(pairs: list[tuple[tuple[float, ...], tuple[float, ...]]], i: int) -> float:
    return statistics.fmean(abs(k[i] - m[i]) / m[i] for k, m in pairs)


def summary(priced: list[Priced]) -> None:
    print("\nper source: MAPE of TTFT, TPOT, output tok/s per GPU | measured inside kvplan's band (of 3 a point)")
    for key in dict.fromkeys(x.key for x in priced):
        rows = [x for x in priced if x.key == key]
        e = [_mape([(x.predicted, x.measured) for x in rows], i) for i in range(3)]
        ins = sum(sum(x.inside) for x in rows)
        print(f"| {key} | {len(rows)} | {e[0]:.1%} | {e[1]:.1%} | {e[2]:.1%} | {ins} of {3 * len(rows)} |"
              .replace("%", " %"))  # fmt: skip
    e = [_mape([(x.predicted, x.measured) for x in priced], i) for i in range(3)]
    print(f"all {len(priced)} points: {e[0]:.1%} / {e[1]:.1%} / {e[2]:.1%}")
    print("largest miss, a ratio either way, by what the row borrowed (coeffs.WORST_BORROWED, WORST_SPECULATIVE,"
          " rounded up):"
          " TTFT, TPOT, tok/s")  # fmt: skip
    for kind in sorted({x.kind for x in priced}):
        cells = []
        for i in range(3):
            miss, where = max((max(k[i] / m[i], m[i] / k[i]), x.point.id) for x in priced if x.kind == kind
                              for k, m in ((x.predicted, x.measured),))  # fmt: skip
            cells.append(f"{math.ceil(miss * 100) / 100:.2f} ({where})")
        print(f"  {kind}: " + ", ".join(cells))


def beside_aic(priced: list[Priced], path: str) -> None:
    """kvplan's and AIConfigurator's MAPE on the closed-loop points aic_predictions.py --given estimated; AIC's
    throughput from its TTFT and TPOT by Little's law over the closed loop, as kvplan's."""
    with open(path, encoding="utf-8") as f:
        est = {x["id"]: x for x in csv.DictReader(f)}
    print("\nbeside AIConfigurator (same points): source | estimated | MAPE kvplan / AIC of TTFT, TPOT, tok/s per GPU")
    for key in dict.fromkeys(x.key for x in priced if x.point.id in est):
        asked = [x for x in priced if x.key == key and x.point.id in est]
        done = [x for x in asked if est[x.point.id]["aic_ttft_ms"]]
        if not done:
            print(f"| {key} | 0 of {len(asked)} | - | - | - | {est[asked[0].point.id]['error'][:80]} |")
            continue
        theirs = []
        for x in done:
            t, q = float(est[x.point.id]["aic_ttft_ms"]), float(est[x.point.id]["aic_tpot_ms"])
            theirs.append((t, q, x.point.concurrency * x.osl / ((t + (x.osl - 1) * q) / 1e3) / x.gpus))
        cells = [f"{_mape([(x.predicted, x.measured) for x in done], i):.1%} / "
                 f"{_mape([(a, x.measured) for a, x in zip(theirs, done, strict=True)], i):.1%}"
                 for i in range(3)]  # fmt: skip
        print(f"| {key} | {len(done)} of {len(asked)} | {' | '.join(cells)} | |".replace("%", " %"))


def aic_rows(points: list[Point]) -> None:
    """The closed-loop points without speculative decoding as rows for aic_predictions.py --given (AIConfigurator
    prices a fixed concurrency, not a burst), at the lengths kvplan prices them (a range ratio's means)."""
    out = csv.writer(sys.stdout)
    out.writerow(["id", "model_path", "system", "backend", "isl", "osl", "batch_size", "tp_size",
                  "attention_dp_size", "moe_tp_size", "moe_ep_size", "gemm_quant_mode", "moe_quant_mode"])  # fmt: skip
    for p in points:
        if not p.concurrency or p.acceptance:  # a burst, or speculative decoding: not given to AIConfigurator
            continue
        plan = load_plan(None, str(HERE / "deployments" / f"{p.deployment}.yaml"), [])
        dep = plan.deployment
        isl, osl = (mean_length(n, p.range_ratio) if p.range_ratio < 1 else n for n in (p.isl, p.osl))  # as perf
        name, gemm, moe = AIC_MODEL[plan.arch.name]
        out.writerow([p.id, name, f"{dep.gpu.key}_sxm", plan.engine, isl, osl, p.concurrency, dep.tp,
                      max(dep.dp_attention, 1), dep.tp // max(dep.ep, 1), dep.ep, gemm, moe])  # fmt: skip


def main() -> int:
    points = load_points()
    if "--aic-rows" in sys.argv:
        aic_rows(points)
        return 0
    print(f"{'point':<5} {'load':<11} {'isl/osl priced (seen)':<22} {'TTFT ms meas / kvplan [band]':<36} "
          f"{'TPOT ms meas / kvplan [band]':<32} out tok/s/GPU meas / kvplan [band]")  # fmt: skip
    priced = []
    for p in points:
        priced.append(price(p))
        print(priced[-1].line)
    summary(priced)
    aic = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--aic=")), None)
    if aic:
        beside_aic(priced, aic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
