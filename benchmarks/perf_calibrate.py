"""Fit kvplan.perf's efficiency coefficients on AIConfigurator's measured rows and print the held-out error.

Data: ``aiconfigurator_core/systems/silicon_sample.csv`` from the Apache-2.0 wheel ``aiconfigurator-core==0.12.0``
(NVIDIA; measured TTFT / TPOT of SGLang, vLLM and TRT-LLM deployments with their parallelism, ISL / OSL and
concurrency). kvplan never needs it at run time: this script reads it, fits, and prints the coefficient rows that
kvplan/perf/coeffs_table.py carries.

    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic && unzip -o /tmp/aic/*.whl \
        'aiconfigurator_core/systems/silicon_sample.csv' -d /tmp/aic
    PYTHONPATH=. python benchmarks/perf_calibrate.py /tmp/aic/aiconfigurator_core/systems/silicon_sample.csv

Split: the fit sees only the measurements of ``source_file=2026-03-25.csv`` (the first collection); every other
source's (``2026-04-06.csv``, ``db-dump/2026-04-27``, the gap-analysis files, with engine versions the first never
ran: SGLang 0.5.6.post2, vLLM 0.12.0, nightlies) is held out ("later"), each measurement once and none the fit saw
(benchmarks/_silicon_rows.py, which also reads each deployment as its row's id names it). Each training group of a
row fitted on several is checked too, predicted by the row refitted without it ("left out"). Rows kept: aggregated
serving (``mode=agg``), pp 1, SGLang or vLLM, H200 / B200, models kvplan has a preset for. Measured throughput is
not in the CSV: it is derived the way a closed loop runs, concurrency × osl / (ttft + (osl − 1) × tpot) per GPU,
for both the rows and kvplan.
A weight-only format (``WEIGHT_ONLY``) in a row whose rows hold a native format too gets its own GEMM and memory
efficiencies beside the row's shared terms (coeffs.FormatEff). Each row's GEMMs are priced at the formats the
checkpoint it ran stores them in (``CHECKPOINT``), as `kvplan perf` prices that checkpoint; the fit is a coordinate
descent run to its loss's minimum (``STEPS``, ``CONVERGED``) from START and from each of ``RESTARTS``, the lowest
training loss kept.
``--prefill-us`` fits a fixed latency of each step with prefill tokens as well (tried, not kept: README, "Tried and not
kept"); kvplan's step model has no such term.
AIConfigurator's own predictions are not in the CSV: benchmarks/aic_predictions.py makes them in AIConfigurator's
own environment, and ``--aic=FILE`` prints its error beside kvplan's on the rows it estimated.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
from _silicon_rows import GPU, PRESET, TRAIN_SOURCE, concurrency_of, kept, measurements  # benchmarks/

from kvplan.engines import plan_pool
from kvplan.models.arch import ModelArch, Split
from kvplan.models.deploy import Deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.perf.coeffs import BAND
from kvplan.perf.peaks import Peaks, peaks_of
from kvplan.perf.predict import GemmFormats, rank_budget
from kvplan.perf.sched import WAVES, closed_loop
from kvplan.perf.shape import StepShape, step_shape, weight_bytes_per_gpu
from kvplan.perf.step import parts

QUANT = {
    "fp8_block": "fp8",
    "nvfp4": "fp4",
    "int4_wo": "int4",
    "int4": "int4",
    "fp8": "fp8",
    "fp4": "fp4",
    "bf16": "bf16",
}
BUDGET = 8192  # --fixed-budget: the token budget every row ran under before the engine's own defaults were used
FIXED_BUDGET = "--fixed-budget" in sys.argv
POOL = "--pool" in sys.argv  # --pool: admit against the pool kvplan plans for the row (held-out error: README)
PROMPTS_PER_CLIENT = 3
SHOW = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--rows=")), "")  # --rows=TEXT: each row of
# the groups whose name holds TEXT, measured beside predicted
PREFILL_US = "--prefill-us" in sys.argv  # --prefill-us: fit a fixed latency of each step with prefill tokens too
STEADY = "--burst" not in sys.argv  # --burst: every client at once, seen at once (the model before the steady state)
START = {"gemm_eff": 0.6, "prefill_eff": 0.6, "attention_eff": 0.4, "mem_eff": 0.7, "layer_us": 40.0,
         "request_us": 50_000.0, "indexer_us": 20.0}  # fmt: skip
FIXED = {"link_eff": 0.7, "comm_us": 8.0}
WEIGHT_ONLY = ("int4",)
"""GEMM quant modes dequantized to bf16 in the GEMM (W4A16, vLLM's Marlin MoE): their kernels reach another share of
HBM than native fp8 / fp4 ones, so a row whose rows hold both fits them apart (FORMAT_KEYS, kvplan.perf.coeffs
FormatEff). Chosen by kernel class, not by the held-out error: splitting fp8 from fp4 on the Blackwell SGLang MLA row
the same way was tried and priced its later rows worse (README, "Tried and not kept")."""
FORMAT_KEYS = ("gemm_eff", "prefill_eff", "mem_eff")
GEMM_PARTS = ("dense GEMMs", "attention GEMMs", "expert GEMMs")
"""kvplan.perf.step's GEMM parts, each a roofline at its format's peak and the row's GEMM efficiencies."""
HF = str(Path(__file__).resolve().parent.parent / "tests" / "data" / "hf")
CHECKPOINT = {
    ("glm-5", "nvfp4"): f"{HF}/glm-5-nvfp4",
    ("deepseek-v3", "nvfp4"): f"{HF}/deepseek-v3.1-nvfp4",
    ("kimi-k2", "nvfp4"): f"{HF}/kimi-k2.5-nvfp4",
    ("kimi-k2", "int4_wo"): f"{HF}/kimi-k2.5/config.json",
    ("gpt-oss-120b", "nvfp4"): "gpt-oss-120b",
}
"""The checkpoint a row of (preset, moe_quant_mode) ran, whose quantization config names each GEMM's format as
`kvplan perf` reads it (GemmFormats.of): NVIDIA's NVFP4 checkpoints keep attention bf16 (GLM-5-NVFP4 and
Kimi-K2.5-NVFP4 every attention projection, GLM-5's indexer too; DeepSeek's q / kv projections, o_proj NVFP4: the
CSV does not say which of nvidia/DeepSeek-R1-0528-FP4 (whole block bf16) or -FP4-v2 (o_proj quantized too) ran, so
v2, whose exclusions are DeepSeek-V3.1-NVFP4's, on the same architecture); Kimi-K2.5's int4 checkpoint quantizes only
its routed experts, gpt-oss-120b's MXFP4 only its experts. Every other row: its CSV quant modes, attention as the
other dense GEMMs (fp8 checkpoints quantize them alike)."""


@dataclass
class Row:
    id: str  # the CSV's row id (benchmarks/aic_predictions.py keys its estimates by it)
    key: tuple[str, str, str]  # (gpu class, engine, family)
    group: str  # the report's (model, GPU, engine, version)
    train: bool
    isl: int
    osl: int
    concurrency: int
    gpus: int
    ttft_ms: float
    tpot_ms: float
    arrays: dict[str, np.ndarray]
    sched: object
    deployment: str = ""
    """tp / attention DP / expert parallel and quant, as priced (--rows prints it)."""
    moe: bool = True
    """The model has routed experts (every coefficient row is fitted on such models; dense ones get their own band)."""
    waves: tuple[dict[str, np.ndarray], object] | None = None
    """The same loop with the clients in waves (an engine that keeps them, kvplan.perf.sched.WAVES), else None."""

    @property
    def fmt(self) -> str:
        """The GEMM quant mode the row's coefficients are asked for (the routed experts' where the model has them)."""
        return self.deployment.split("/")[-1]


@cache
def _checkpoint_formats(path: str) -> GemmFormats:
    return GemmFormats.of(load_model(path), moe=True)


def formats_of(x: dict[str, str], name: str) -> GemmFormats:
    """The GEMM formats row x's checkpoint runs at (CHECKPOINT), else its CSV quant modes'."""
    path = CHECKPOINT.get((name, x["moe_quant_mode"]))
    if path:
        return _checkpoint_formats(path)
    prec = QUANT[x["precision"]]
    quant = QUANT.get(x["gemm_quant_mode"], prec)
    return GemmFormats(quant, quant, QUANT.get(x["moe_quant_mode"], prec))


def _arrays(
    shape: StepShape, split: Split, f: GemmFormats, peaks: Peaks, sched: object, nodes: int
) -> dict[str, np.ndarray]:
    cols: dict[str, list[float]] = defaultdict(list)
    for b in sched.steps:  # type: ignore[attr-defined]
        got = {p.name: p for p in parts(shape, b, split, f.dense, f.experts, nodes=nodes, attention_quant=f.attention)}
        for name in (*GEMM_PARTS, "attention"):
            p = got.get(name)
            pre = p.prefill_ppm / 10**6 if p else 0.0
            cols[f"{name}:c"].append(p.flops * (1 - pre) / peaks.flops_per_s(p.dtype) if p else 0.0)
            cols[f"{name}:p"].append(p.flops * pre / peaks.flops_per_s(p.dtype) if p else 0.0)
            cols[f"{name}:m"].append(p.bytes / peaks.hbm_bytes_per_s if p else 0.0)
        ar = got.get("all-reduce")
        cols["ar:link"].append(ar.bytes / peaks.link_bytes_per_s if ar else 0.0)
        cols["ar:calls"].append(ar.calls if ar else 0)
        cols["pre:steps"].append(1.0 if b.prefill_tokens else 0.0)
        cols["layers:calls"].append(got["layers"].calls)
        idx = got.get("indexer")
        cols["idx:calls"].append(idx.calls if idx else 0)
        net = got.get("all-reduce net")  # a tp group over several nodes: NCCL over the NIC, its own latency
        cols["ar:net"].append(net.bytes / peaks.net_bytes_per_s if net else 0.0)
        cols["ar:lat"].append(net.latency_ns * 1e-9 if net else 0.0)
    return {k: np.asarray(v) for k, v in cols.items()}


def load(path: str) -> list[Row]:
    rows, shapes = [], {}
    priced: dict[tuple[object, ...], tuple[dict[str, np.ndarray], object]] = {}  # the same config in several sources
    with open(path, encoding="utf-8") as f:
        table = [x for x in csv.DictReader(f) if kept(x)]
    found, suspect = measurements(table)
    print(
        f"# {len(table)} rows kept, {len(found)} distinct measurements ({sum(m.train for m in found)} seen by the"
        f" fit), {suspect} left out as suspect (_silicon_rows.py)"
    )
    for m in found:
        x = m.row
        name = PRESET[x["model_path"]]
        if name not in shapes:
            shapes[name] = (step_shape(load_model(name)), load_model(name).is_mla)
        shape, mla = shapes[name]
        tp, dp = int(x["tp_size"]), int(x["attention_dp_size"] or 1)
        ep = int(x["moe_ep_size"] or 1)
        split = Split.of(tp=tp * dp, dp_attention=dp, ep=ep)
        f = formats_of(x, name)
        conc = concurrency_of(x)
        isl, osl = int(x["isl"]), int(x["osl"])
        peaks = peaks_of(find_gpu(GPU[x["system"]]))
        assert peaks is not None
        key = (name, tp, dp, ep, f, peaks.gpu_key, x["backend"], isl, osl, conc)
        if key not in priced:
            cap, pool, budget = engine_plan(x, name, split, f)
            pool, budget = pool if POOL else 0, BUDGET if FIXED_BUDGET else budget
            pool = pool if isl + osl <= pool // dp else 0  # DP attention: a rank's scheduler, budget and pool each
            nodes = -(-tp * dp // 8)  # 8 GPUs a node (DGX / HGX H200 and B200)
            loops = []
            for waves in (False, True) if STEADY and WAVES[x["backend"]] else (False,):
                sched = closed_loop(engine=x["backend"], isl=isl, osl=osl, concurrency=conc,
                                    cap=max(min(cap * dp, conc), 1), budget=budget * dp,
                                    num_prompts=PROMPTS_PER_CLIENT * conc, warmup=conc, steady=STEADY, waves=waves,
                                    pool=pool)  # fmt: skip
                loops.append((_arrays(shape, split, f, peaks, sched, nodes), sched))
            priced[key] = (loops[0], loops[1] if len(loops) > 1 else None)
        (arrays, sched), waves_loop = priced[key]
        ver = x["backend_version"] or "?"
        rows.append(Row(id=x["id"], key=(peaks.gpu_class, x["backend"], "mla" if mla else "gqa"),
                        group=f"{name} {x['system'][:4]} {x['backend']} {ver}", train=m.train,
                        isl=isl, osl=osl, concurrency=conc, gpus=tp * dp, ttft_ms=float(x["silicon_ttft_ms"]),
                        tpot_ms=float(x["silicon_tpot_ms"]), arrays=arrays, sched=sched,
                        deployment=f"tp{tp} dp{dp} ep{ep} {_formats_text(f)}", moe=shape.num_experts > 0,
                        waves=waves_loop))  # fmt: skip
    return rows


ENGINE_VERSION = {"sglang": "0.5.9", "vllm": "0.33.0"}
"""A row whose SGLang version is not a release (nightly-dev, glm5-hopper, unversioned) is planned as 0.5.9, the
release the other SGLang rows ran (and one whose source kvplan read); an unversioned vLLM row as 0.33.0."""
_PLANS: dict[tuple[object, ...], tuple[int, int, int]] = {}


def _formats_text(f: GemmFormats) -> str:
    """'dense/experts', the attention projections' format in brackets where apart (Row.fmt reads the last)."""
    return f"{f.dense}{f' (attention {f.apart})' if f.apart else ''}/{f.experts}"


def engine_plan(x: dict[str, str], name: str, split: Split, f: GemmFormats) -> tuple[int, int, int]:
    """(running cap, KV pool tokens, token budget) the engine builds for the row's deployment, as `kvplan perf`
    prices a deployment (kvplan.perf.predict.perf): ``max_running_requests`` / ``max_num_seqs``, the pool of every
    DP-attention rank together, ``chunked_prefill_size`` / ``max_num_batched_tokens`` (SGLang's default is 16,384
    on a GPU of more than 160 GiB: B200). The preset's weights are rescaled to the row's GEMM quant modes (an NVFP4
    or int4 checkpoint leaves more of the GPU to the pool). A deployment kvplan's plan refuses (a quant check of the
    preset's checkpoint the row's does not have) keeps the pool the plan computed; none: no pool, cap at the
    concurrency."""
    dp = int(x["attention_dp_size"] or 1)
    tp = int(x["tp_size"]) * dp
    key = (name, x["backend"], x["backend_version"], x["system"], tp, dp, int(x["moe_ep_size"] or 1), f)
    if key not in _PLANS:
        arch = load_model(name)
        ver = x["backend_version"] if x["backend"] == "vllm" and x["backend_version"] else ENGINE_VERSION[x["backend"]]
        dep = Deployment(name="calibration", source="perf_calibrate", model=name, engine=x["backend"],
                         engine_version=ver, gpu=find_gpu(GPU[x["system"]]), nodes=-(-tp // 8), tp=tp,
                         dp_attention=dp, ep=int(x["moe_ep_size"] or 1),
                         explicit=frozenset({"tp", "nodes", "dp_attention", "ep"}))  # fmt: skip
        dep = replace(dep, weights_per_gpu=_row_weights(arch, dep, split, f))
        plan = plan_pool(arch, dep)
        pool = plan.usable_tokens * max(plan.deployment.dp_attention, 1)
        cap = plan.max_running_requests if pool else 1 << 30  # no pool: the concurrency caps the running set
        _PLANS[key] = (max(cap, 1), pool, rank_budget(plan))
    return _PLANS[key]


def _row_weights(arch: ModelArch, dep: Deployment, split: Split, f: GemmFormats) -> int:
    """The weights on one GPU at the row's formats: the plan's at the preset's, its GEMMs re-priced."""
    planned = plan_pool(arch, dep).knob("weights_per_gpu").as_int()
    shape = step_shape(arch)
    own = GemmFormats.of(arch, moe=shape.num_experts > 0)
    was = sum(weight_bytes_per_gpu(shape, split, own.dense, own.experts, own.attention))
    now = sum(weight_bytes_per_gpu(shape, split, f.dense, f.experts, f.attention))
    return max(planned - was + now, 1)


def _per_request(arrays: dict[str, np.ndarray], sched: object, r: Row, c: dict[str, float]) -> list[np.ndarray]:
    """Sorted (TTFT, TPOT, e2e) in seconds of the measured requests of one loop under coefficients c."""
    a = arrays
    t = a["layers:calls"] * c["layer_us"] * 1e-6
    gemm, prefill, mem = (c.get(f"{r.fmt}:{k}", c[k]) for k in FORMAT_KEYS)  # Coefficients.for_quant
    for name, eff in (*((p, gemm) for p in GEMM_PARTS), ("attention", c["attention_eff"])):
        pre = a[f"{name}:p"] / (prefill if name != "attention" else eff)
        t += np.maximum(a[f"{name}:c"] / eff + pre, a[f"{name}:m"] / mem)
    t += a["ar:link"] / c["link_eff"] + a["ar:calls"] * c["comm_us"] * 1e-6
    t += a["ar:net"] / c["link_eff"] + a["ar:lat"] + a["idx:calls"] * c["indexer_us"] * 1e-6
    t += a["pre:steps"] * c.get("prefill_us", 0.0) * 1e-6
    ends = np.concatenate(([0.0], np.cumsum(t)))
    ids = list(sched.measured_ids)  # type: ignore[attr-defined]
    arr, first, fin = (np.asarray(v)[ids] + 1 for v in (sched.arrived, sched.first, sched.finished))  # type: ignore[attr-defined]
    outside = (c.get("request_us", 0.0) + c.get("client_us", 0.0) * r.concurrency) * 1e-6  # coeffs.py
    ttft = ends[first] - ends[arr] + outside
    tpot = (ends[fin] - ends[first]) / max(r.osl - 1, 1)
    e2e = ends[fin] - ends[arr] + outside
    return [np.sort(ttft), np.sort(tpot), np.sort(e2e)]


def predict(r: Row, c: dict[str, float]) -> tuple[float, float, float]:
    """(TTFT ms median, TPOT ms median, output tok/s per GPU) of row r under coefficients c; a loop that can keep
    waves blended by c's wave_share as kvplan.perf.sched.blend does (each quantile the share-weighted mean)."""
    got = _per_request(r.arrays, r.sched, r, c)
    share = c.get("wave_share", 0.0) if r.waves else 0.0
    if share and r.waves:
        w = _per_request(r.waves[0], r.waves[1], r, c)
        got = [(1 - share) * x + share * y for x, y in zip(got, w, strict=True)]
    ttft, tpot, e2e = got
    tput = r.concurrency * r.osl / float(np.mean(e2e)) / r.gpus  # Little's law, as measured_tput
    return float(np.median(ttft)) * 1e3, float(np.median(tpot)) * 1e3, tput


def measured_tput(r: Row) -> float:
    return r.concurrency * r.osl / ((r.ttft_ms + (r.osl - 1) * r.tpot_ms) / 1e3) / r.gpus


def loss(rows: list[Row], c: dict[str, float]) -> float:
    total = 0.0
    for r in rows:
        ttft, tpot, _ = predict(r, c)
        total += abs(math.log(ttft / r.ttft_ms)) + 2 * abs(math.log(tpot / r.tpot_ms))
    return total / max(len(rows), 1)


def start_of(rows: list[Row]) -> dict[str, float]:
    """The coefficients fitted on ``rows`` and where each starts."""
    start = {**START, "wave_share": 0.5} if any(r.waves for r in rows) else START  # only where the engine keeps waves
    if rows and rows[0].key[1] == "vllm":  # its API server streams every request in one loop (coeffs.client_us)
        start = {**start, "client_us": 200.0}
    if PREFILL_US:
        start = {**start, "prefill_us": 5000.0}
    fmts = {r.fmt for r in rows}
    if fmts - set(WEIGHT_ONLY):  # a native format to share the row with: each weight-only one its own efficiencies
        start = {**start, **{f"{q}:{k}": START[k] for q in sorted(fmts & set(WEIGHT_ONLY)) for k in FORMAT_KEYS}}
    return start


STEPS = ((0.5, 0.7, 0.85, 1.18, 1.4, 2.0), (0.8, 0.9, 0.95, 1.05, 1.1, 1.25))
"""The coordinate descent's factors, coarse then fine, each run until a round over every coefficient lowers the loss
by less than CONVERGED (six coarse rounds, the fit before 2026-12-07, stopped short of the minimum: README)."""
CONVERGED = 1e-4
MAX_ROUNDS = 40


RESTARTS = ({"layer_us": 1.0},)
"""Further starts of the descent beside START's: from one start it can stop in another minimum (2026-12-08: from a
layer's latency of 1 µs instead of 40, training losses 0.1–2.7 % apart on every row, held-out figures up to 4
points apart: README), so the fit descends from each and keeps the lowest training loss."""


def fit(rows: list[Row]) -> dict[str, float]:
    """The coefficients of the lowest training loss over the descents from START and each of RESTARTS (a tie keeps
    the first)."""
    best: tuple[float, dict[str, float]] | None = None
    for over in ({}, *RESTARTS):
        got = descend(rows, {**start_of(rows), **over})
        if best is None or got[0] < best[0]:
            best = got
    assert best is not None
    return best[1]


def descend(rows: list[Row], start: dict[str, float]) -> tuple[float, dict[str, float]]:
    """(training loss, coefficients) of the coordinate descent from ``start`` run to its minimum (STEPS)."""
    c = {**start, **FIXED}
    best = loss(rows, c)
    for factors in STEPS:
        for _ in range(MAX_ROUNDS):
            before = best
            for k in start:
                for f in factors:
                    trial = {**c, k: min(c[k] * f, 1.0) if k.endswith(("_eff", "_share")) else c[k] * f}
                    got = loss(rows, trial)
                    if got < best:
                        best, c = got, trial
            if best >= before * (1 - CONVERGED):
                break
    return best, c


def mape(pairs: list[tuple[float, float]]) -> float:
    return statistics.fmean(abs(p - m) / m for p, m in pairs) if pairs else float("nan")


Check = tuple[str, list[Row], dict[str, float], str]
"""(group, its rows, the coefficients that predict them, how they were held out)."""


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rows = load(args[0] if args else "/tmp/aic/aiconfigurator_core/systems/silicon_sample.csv")
    fitted: dict[tuple[str, str, str], dict[str, float]] = {}
    for key in sorted({r.key for r in rows}):
        train = [r for r in rows if r.key == key and r.train]
        if train:
            fitted[key] = fit(train)
            names = sorted({r.group for r in train})
            quants = " / ".join(sorted({r.deployment.split("/")[-1] for r in train}))  # coeffs.quants
            print(f"# {key}: fitted on {len(train)} rows ({TRAIN_SOURCE}): {'; '.join(names)}; GEMMs {quants}")
            print("#   " + ", ".join(f"{k}={v:.3g}" for k, v in fitted[key].items()))
    print("\nheld-out MAPE, kvplan | coefficients used | how held out: 'later' = a measurement of a later source the")
    print("fit never saw; 'left out' = a training group predicted by its row refitted without it (leave one group out)")
    print(f"{'model GPU engine version':<42} {'rows':>4} {'TTFT':>6} {'TPOT':>6} {'tok/s':>6}  coefficients")
    by_group: dict[str, list[Row]] = defaultdict(list)
    table: list[str] = []
    per_key: dict[tuple[str, str, str], list[tuple[int, list[float]]]] = defaultdict(list)
    dense: dict[tuple[str, str, str], list[tuple[int, list[float]]]] = defaultdict(list)
    for r in rows:
        if not r.train:
            by_group[r.group].append(r)
    checks = [(g, rs, _coefficients(rs[0].key, fitted), "later") for g, rs in sorted(by_group.items())]
    checks += left_out(rows, fitted)
    errors: list[list[float]] = []
    for group, rs, c, how in checks:
        key = rs[0].key
        own = key in fitted
        preds = [predict(r, c) for r in rs]
        measured = ([r.ttft_ms for r in rs], [r.tpot_ms for r in rs], [measured_tput(r) for r in rs])
        e = [mape([(p[i], m) for p, m in zip(preds, ms, strict=True)]) for i, ms in enumerate(measured)]
        errors.append(e)
        used = "/".join(key) + ("" if own else " (borrowed)")
        print(f"{group:<42} {len(rs):>4} {e[0]:>6.1%} {e[1]:>6.1%} {e[2]:>6.1%}  {used}, {how}")
        table.append(f"| {group} | {how} | {len(rs)} | {e[0]:.1%} | {e[1]:.1%} | {e[2]:.1%} | {used} |"
                     .replace("%", " %"))  # fmt: skip
        if SHOW and SHOW in group:
            _show(rs, preds)
        if own and rs[0].moe:
            per_key[key].append((len(rs), e))
        if not rs[0].moe:  # dense: the row that priced it, own or borrowed
            dense[_row_of(key, fitted)].append((len(rs), e))
    left = [(rs, c) for _, rs, c, how in checks if how == "left out"]
    if left:  # the largest miss of a row refitted without the group, either way (coeffs.WORST_BORROWED)
        worst = _largest_miss(left)
        print(f"largest left-out miss, a ratio either way (coeffs.WORST_BORROWED): TTFT {worst[0]:.2f} (rows whose"
              f" clients queue for the pool, priced here without it unless --pool), TPOT {worst[1]:.2f}, tok/s"
              f" {worst[2]:.2f}")  # fmt: skip
    for group, rs, c, how in checks:  # a row borrowed across a kernel family (coeffs.WORST_BORROWED)
        if how == "later" and rs[0].key not in fitted:
            w = _largest_miss([(rs, c)])
            print(f"largest miss of {group}, priced by a borrowed row: TTFT {w[0]:.2f}, TPOT {w[1]:.2f}, tok/s"
                  f" {w[2]:.2f}")  # fmt: skip
    print("\nheld-out MAPE per coefficient row (row-weighted over its own MoE groups): TTFT, TPOT, tok/s")
    _per_row(per_key)
    _inside_band(checks, per_key)
    print("held-out MAPE per coefficient row on dense models (every group it priced, own or borrowed; kvplan's")
    print("dense_mape, a row without any taking the largest of the others'): TTFT, TPOT, tok/s")
    _per_row(dense)
    print("\nREADME table (model, GPU, engine, version | held out | rows | TTFT | TPOT | tok/s MAPE | coefficients):")
    print("\n".join(table))
    aic = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--aic=")), None)
    if aic:
        beside_aic(checks, aic)
    return 0


def _largest_miss(checks: list[tuple[list[Row], dict[str, float]]]) -> list[float]:
    """Each figure's largest ratio either way (max of predicted / measured, measured / predicted) over the rows."""
    worst = [1.0, 1.0, 1.0]
    for rs, c in checks:
        for r in rs:
            for i, (p, m) in enumerate(zip(predict(r, c), (r.ttft_ms, r.tpot_ms, measured_tput(r)), strict=True)):
                worst[i] = max(worst[i], p / m, m / p)
    return worst


def left_out(rows: list[Row], fitted: dict[tuple[str, str, str], dict[str, float]]) -> list[Check]:
    """Leave one group out: each training group of a coefficient row fitted on several, predicted by the row refitted
    on the others (another model or engine version on the same GPU class and engine) — the error of a deployment
    whose own measurements the fit never saw, where no later source measured it."""
    out = []
    for key in sorted(fitted):
        train = [r for r in rows if r.key == key and r.train]
        for group in sorted({r.group for r in train}):
            rest = [r for r in train if r.group != group]
            if rest:  # another model or version of the row remains to fit on
                out.append((group, [r for r in train if r.group == group], fit(rest), "left out"))
    return out


def _show(rs: list[Row], preds: list[tuple[float, float, float]]) -> None:
    for r, p in zip(rs, preds, strict=True):
        dep = f"{r.gpus} GPUs, {r.deployment}"
        print(
            f"    {r.isl}/{r.osl} x{r.concurrency:<4} {dep:<26} TTFT {r.ttft_ms:8.0f} / {p[0]:8.0f} ms  TPOT"
            f" {r.tpot_ms:6.1f} / {p[1]:6.1f} ms  tok/s {measured_tput(r):7.0f} / {p[2]:7.0f}  {r.id[-28:]}"
        )


def _weighted(ws: list[tuple[int, list[float]]]) -> list[float]:
    """A row's held-out MAPE of TTFT, TPOT and tok/s: its groups' MAPEs weighted by their rows (coeffs.heldout_mape)."""
    n = sum(w for w, _ in ws)
    return [sum(w * e[i] for w, e in ws) / n for i in range(3)]


def _per_row(rows: dict[tuple[str, str, str], list[tuple[int, list[float]]]]) -> None:
    for key, ws in sorted(rows.items()):
        print(f"# {'/'.join(key)}: " + ", ".join(f"{m:.3f}" for m in _weighted(ws)))


def _inside_band(checks: list[Check], per_key: dict[tuple[str, str, str], list[tuple[int, list[float]]]]) -> None:
    """How many held-out figures of each row's own MoE groups lie inside the band kvplan prints with them: × / ÷
    (1 + coeffs.BAND × the row's held-out MAPE), the MAPE the row-weighted one _per_row prints (coeffs.heldout_mape)."""
    print(f"measured inside kvplan's band (x / (1 + {BAND:g} x the row's held-out MAPE)), own MoE groups: TTFT, TPOT,"
          " tok/s (coeffs.BAND_HELD)")  # fmt: skip
    for key, ws in sorted(per_key.items()):
        m = _weighted(ws)
        inside, total = [0, 0, 0], 0
        for _, rs, c, _ in checks:
            if rs[0].key != key or not rs[0].moe:
                continue
            for r in rs:
                total += 1
                for i, (p, x) in enumerate(zip(predict(r, c), (r.ttft_ms, r.tpot_ms, measured_tput(r)), strict=True)):
                    inside[i] += p / (1 + BAND * m[i]) <= x <= p * (1 + BAND * m[i])
        print(f"# {'/'.join(key)}: " + ", ".join(f"{k} of {total}" for k in inside))


def _row_of(key: tuple[str, str, str], fitted: dict[tuple[str, str, str], dict[str, float]]) -> tuple[str, str, str]:
    """The fitted row _coefficients gives ``key``."""
    got = _coefficients(key, fitted)
    return next(k for k, v in fitted.items() if v is got)


def _coefficients(key: tuple[str, str, str], fitted: dict[tuple[str, str, str], dict[str, float]]) -> dict[str, float]:
    return (
        fitted.get(key) or next((v for k, v in fitted.items() if k[:2] == key[:2]), None) or next(iter(fitted.values()))
    )


def beside_aic(checks: list[Check], path: str) -> None:
    """kvplan's and AIConfigurator's MAPE on the same held-out rows: those aic_predictions.py estimated, kvplan's
    by the coefficients each check used (a left-out group's: its row refitted without it); AIC's throughput derived
    from its TTFT / TPOT as measured_tput derives the rows'."""
    with open(path, encoding="utf-8") as f:
        est = {x["id"]: x for x in csv.DictReader(f)}
    print("\nREADME table beside AIConfigurator (same rows): model, GPU, engine, version | held out | rows estimated")
    print("by AIC | TTFT kvplan / AIC | TPOT kvplan / AIC | tok/s kvplan / AIC | AIC's refusals")
    for group, rs, c, how in checks:
        mine = [r for r in rs if r.id in est]
        done = [r for r in mine if est[r.id]["aic_ttft_ms"]]
        if not mine:
            continue
        if not done:
            print(f"| {group} | {how} | 0 of {len(mine)} | - | - | - | {est[mine[0].id]['error'][:70]} |")
            continue
        ours = [predict(r, c) for r in done]
        theirs = []
        for r in done:
            t, p = float(est[r.id]["aic_ttft_ms"]), float(est[r.id]["aic_tpot_ms"])
            theirs.append((t, p, r.concurrency * r.osl / ((t + (r.osl - 1) * p) / 1e3) / r.gpus))
        meas = [(r.ttft_ms, r.tpot_ms, measured_tput(r)) for r in done]
        cells = []
        for i in range(3):
            k = mape([(o[i], m[i]) for o, m in zip(ours, meas, strict=True)])
            a = mape([(t[i], m[i]) for t, m in zip(theirs, meas, strict=True)])
            cells.append(f"{k:.1%} / {a:.1%}".replace("%", " %"))
        print(f"| {group} | {how} | {len(done)} of {len(mine)} | {' | '.join(cells)} | |")


if __name__ == "__main__":
    sys.exit(main())
