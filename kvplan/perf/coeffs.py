"""Efficiency coefficients as data: one row per (GPU class, engine, engine-version range, kernel family), each
naming the measured rows it was fitted on (benchmarks/perf_calibrate.py refits them and prints the held-out error).

A row's fields: the share of the datasheet peak the GEMMs and the attention kernels reach, the share of HBM
bandwidth a memory-bound part reaches, of NVLink an all-reduce reaches, the latency of one collective call and the
fixed latency each layer adds to a step (its chain of small kernels). A deployment with no row of its own borrows
the nearest (same engine and GPU class, else same GPU class, else the first) and says so; its band then widens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.versions import parse_version


@dataclass(frozen=True, kw_only=True)
class FormatEff:
    """A weight format's own GEMM and memory efficiencies inside a coefficient row (``Coefficients.formats``)."""

    quant: str
    gemm_eff: float
    prefill_eff: float
    mem_eff: float


@dataclass(frozen=True, kw_only=True)
class Coefficients:
    gpu_class: str
    engine: str
    versions: tuple[str, str]
    """[first, last] engine versions of the rows it was fitted on (inclusive)."""
    family: str
    """Kernel family: 'mla' (MLA and DSA), 'gqa' (GQA, sliding window, linear state)."""
    gemm_eff: float
    """GEMMs of decode tokens (small M)."""
    prefill_eff: float
    """GEMMs of prefill tokens (large M)."""
    attention_eff: float
    mem_eff: float
    link_eff: float
    comm_us: float
    layer_us: float
    """Each layer's fixed latency a step, whatever its size: the chain of small kernels a layer runs (norms, rotary,
    quantization, router, the attention's and the MoE's smallest launches; AIConfigurator 0.12.0's kernel-level
    measurement of SGLang 0.5.14's attention module, indexer skipped, at TP8 on B200 is 35–42 µs at batch 1–16), and the
    step's scheduler and sampler spread over the layers: fitted. A fixed latency a layer rather than a step: a model
    of another depth than the rows' pays its own (the fixed latency a step, before 2026-12-08, priced GLM-5's 78
    layers as DeepSeek-V3's 61: README)."""
    request_us: float = 0.0
    """Each request's latency outside the steps, paid once before its first token (the HTTP round trip, the chat
    template and tokenizer, the detokenizer and stream, the client's own clock): fitted, not modelled."""
    indexer_us: float = 0.0
    """The DSA indexer's fixed latency per indexer layer per step (its chain of small kernels, kvplan.perf.step):
    fitted on the DSA rows the row was fitted on; 0 for a row fitted without any."""
    client_us: float = 0.0
    """vLLM: a request's further latency before its first token per request in flight (the closed loop's clients;
    an open loop's or a trace's peak running set). vLLM V1's API server detokenizes and streams every request's
    tokens each step in its own event loop (``AsyncLLM`` → ``OutputProcessor.process_outputs``), so a new request's
    turn waits behind the others' streams: fitted on the vLLM rows; 0 for SGLang, whose ``DetokenizerManager`` is a
    process of its own."""
    wave_share: float = 0.0
    """The share of a closed loop's clients that arrive in waves rather than spread over a request's service
    (kvplan.perf.sched.WAVES): fitted on SGLang rows, whose prefill-first policy re-synchronises each wave while the
    clients' turnaround jitter spreads them; 0 for vLLM, which nothing re-synchronises."""
    quants: tuple[str, ...] = ()
    """The GEMM quant modes of the rows it was fitted on (the routed experts' where the model has them): a weight
    format's kernels price apart (benchmarks/perf_calibrate.py, left out: Kimi-K2.5 on B200 vLLM fitted on its int4
    rows alone priced its NVFP4 rows' TPOT 72 % slow, fitted on the NVFP4 alone the int4 rows' 30 % fast), so another
    format borrows the row. () : any."""
    formats: tuple[FormatEff, ...] = ()
    """A weight-only format's efficiencies (int4 W4A16: dequantized to bf16 in the GEMM's main loop, vLLM's Marlin
    MoE), fitted beside the row's shared terms on that format's rows where the row's rows hold a native format too
    (benchmarks/perf_calibrate.py ``WEIGHT_ONLY``): its kernels reach another share of HBM than fp8 / fp4 ones. The
    row's own efficiencies are the native format's; ``for_quant`` swaps them in."""
    format: str = ""
    """The weight format whose ``formats`` entry ``for_quant`` swapped in ('' : the row's own efficiencies)."""
    fitted_on: str
    heldout_mape: tuple[float, float, float]
    """Held-out MAPE of TTFT, TPOT and throughput (fractions) on measurements the fit never saw, of the MoE models the
    row priced as its own (every row is fitted on MoE models): later sources' measurements, and each of the row's
    training groups predicted by the row refitted without it (leave one group out)."""
    dense_mape: tuple[float, float, float] | None = None
    """The same on dense models (no routed experts), every held-out group the row priced, its own or borrowed; a row
    that priced none carries the largest of the others'. None: ``heldout_mape``."""

    @property
    def key(self) -> str:
        at = f" ({self.format} GEMMs)" if self.format else ""
        return f"{self.gpu_class} / {self.engine} {self.versions[0]}-{self.versions[1]} / {self.family}{at}"

    def for_quant(self, quant: str) -> Coefficients:
        """The row as it prices GEMMs in ``quant``: that format's efficiencies where the row fitted its own."""
        f = next((f for f in self.formats if f.quant == quant), None)
        if f is None:
            return self
        return replace(self, gemm_eff=f.gemm_eff, prefill_eff=f.prefill_eff, mem_eff=f.mem_eff, format=f.quant)

    def mape_for(self, moe: bool) -> tuple[tuple[float, float, float], str]:
        """(held-out MAPE of TTFT, TPOT, throughput, which models it was measured on) for a model with routed
        experts or a dense one: the rows' GEMM efficiencies are fitted on MoE models, which price a dense model's
        large GEMMs far off (Llama-3.1-8B on vLLM held out: TPOT 2.4 to 10 × the measured)."""
        if moe or self.dense_mape is None:
            return self.heldout_mape, "MoE models"
        return self.dense_mape, "dense models (every row is fitted on MoE models)"

    def covers(self, version: str) -> bool:
        lo, hi = (parse_version(v) for v in self.versions)
        return lo <= parse_version(version) <= hi


TABLE: tuple[Coefficients, ...] = (
    Coefficients(
        gpu_class="hopper", engine="sglang", versions=("0.5.9", "0.5.9"), family="mla",
        gemm_eff=0.6,
        prefill_eff=0.17, attention_eff=1.0, mem_eff=0.752, link_eff=0.7, comm_us=8.0, layer_us=86.0,
        request_us=145000.0, indexer_us=78.0, wave_share=0.196,
        quants=("fp8",),
        fitted_on="30 rows of source_file=2026-03-25.csv: DeepSeek-R1 H200 SGLang 0.5.9 (15), GLM-5 H200 SGLang"
        " glm5-hopper (15)",
        heldout_mape=(0.5, 0.246, 0.287),
        dense_mape=(1.382, 0.379, 0.348),
    ),
    Coefficients(
        gpu_class="blackwell", engine="sglang", versions=("0.5.6", "0.5.9"), family="mla",
        gemm_eff=0.333,
        prefill_eff=0.136, attention_eff=1.0, mem_eff=0.738, link_eff=0.7, comm_us=8.0, layer_us=82.1,
        request_us=149000.0, indexer_us=98.0, wave_share=0.481,
        quants=("fp4", "fp8"),
        fitted_on="75 rows of source_file=2026-03-25.csv: DeepSeek-R1 B200 SGLang 0.5.6 / 0.5.9, GLM-5 B200 SGLang"
        " nightly-dev",
        heldout_mape=(0.481, 0.243, 0.266),
        dense_mape=(1.382, 1.694, 0.493),
    ),
    Coefficients(
        gpu_class="hopper", engine="vllm", versions=("0.16.0", "0.16.0"), family="mla",
        gemm_eff=0.193,
        prefill_eff=0.256, attention_eff=0.115, mem_eff=0.604, link_eff=0.7, comm_us=8.0, layer_us=96.6,
        request_us=83500.0, client_us=3350.0,
        quants=("int4",),
        fitted_on="15 rows of source_file=2026-03-25.csv: Kimi-K2.5 H200 vLLM 0.16.0 (int4)",
        heldout_mape=(0.137, 0.045, 0.039),
        dense_mape=(1.382, 1.694, 0.493),
    ),
    Coefficients(
        gpu_class="blackwell", engine="vllm", versions=("0.15.1", "0.17.0"), family="mla",
        gemm_eff=0.238,
        prefill_eff=0.278, attention_eff=0.114, mem_eff=1.0, link_eff=0.7, comm_us=8.0, layer_us=91.5,
        request_us=87700.0, client_us=2390.0,
        quants=("fp4", "int4"),
        formats=(FormatEff(quant="int4", gemm_eff=1.0, prefill_eff=0.106, mem_eff=0.423),),
        fitted_on="30 rows of source_file=2026-03-25.csv: Kimi-K2.5 B200 vLLM 0.15.1 (int4) / 0.17.0 (NVFP4)",
        heldout_mape=(0.268, 0.277, 0.263),
        dense_mape=(1.382, 1.694, 0.493),
    ),
    Coefficients(
        gpu_class="hopper", engine="vllm", versions=("0.18.0", "0.18.0"), family="gqa",
        gemm_eff=0.0469,
        prefill_eff=0.129, attention_eff=0.169, mem_eff=0.805, link_eff=0.7, comm_us=8.0, layer_us=78.0,
        request_us=18600.0, client_us=1800.0,
        quants=("fp4",),
        fitted_on="15 rows of source_file=2026-03-25.csv: gpt-oss-120b H200 vLLM 0.18.0",
        heldout_mape=(0.241, 0.16, 0.216),
        dense_mape=(1.057, 1.694, 0.493),
    ),
    Coefficients(
        gpu_class="blackwell", engine="vllm", versions=("0.15.1", "0.15.1"), family="gqa",
        gemm_eff=1.0,
        prefill_eff=0.152, attention_eff=0.22, mem_eff=1.0, link_eff=0.7, comm_us=8.0, layer_us=59.0,
        request_us=16200.0, client_us=1060.0,
        quants=("fp4",),
        fitted_on="18 rows of source_file=2026-03-25.csv: gpt-oss-120b B200 vLLM 0.15.1",
        heldout_mape=(0.26, 0.103, 0.12),
        dense_mape=(0.367, 0.166, 0.133),
    ),
)  # fmt: skip
"""benchmarks/perf_calibrate.py's fit (AIConfigurator 0.12.0 silicon_sample.csv, Apache-2.0), on the rows of
``source_file=2026-03-25.csv`` only, the closed loop priced in its steady state (kvplan.perf.sched) with
``request_us``, the DSA rows' ``indexer_us``, the SGLang rows' ``wave_share`` and the vLLM rows' ``client_us``
fitted beside the efficiencies (and a weight-only format's own GEMM and memory efficiencies, ``formats``, where a row's
rows hold a native format too), each row's steps priced with the token budget and running cap of kvplan's own plan
for the row's deployment. ``heldout_mape`` is the script's "per coefficient row" line: the row-weighted mean of its
held-out lines that used the row, over its MoE groups: the later sources' measurements (2026-04-06.csv,
db-dump/2026-04-27, the gap-analysis files; each measurement once, repeats of a training measurement dropped:
benchmarks/_silicon_rows.py) and, where the row was fitted on several groups, each group left out of its refit;
``dense_mape`` the next line's, over the dense groups (Llama-3.1, a family no row was fitted on: wide on purpose)."""


VERSION_ONLY = "no row of its engine version"
"""How ``coefficients_for`` ends the note of a row borrowed across engine versions alone (same GPU class, engine,
kernel family and GEMM quant mode)."""
FAMILY_ONLY = "no row of its kernel family"
"""The note's end for a row borrowed across kernel families alone (same GPU class and engine, any version)."""
FORMAT = "GEMMs, not"
"""In the note of a row fitted on other GEMM quant modes (a weight format borrowed, whatever else is)."""
_MEASURED_BORROWED = {
    "engine version": (1.84, 1.93, 1.45),
    "kernel family": (4.63, 1.28, 1.62),
    "weight format": (14.99, 12.10, 11.68),
}
WORST_BORROWED = {
    **_MEASURED_BORROWED,
    "other": tuple(max(w[i] for w in _MEASURED_BORROWED.values()) for i in range(3)),
}
"""The largest miss, a ratio either way (max of predicted / measured, measured / predicted) of TTFT, TPOT and output
tokens/s per GPU, of a row borrowed that way on measurements no fit saw. "engine version" (same GPU class, engine,
kernel family and GEMM quant mode) and "weight format" (a GEMM quant mode the row was not fitted on, whatever else
differs): benchmarks/perf_published.py, `kvplan perf` end to end. Across a version: InferenceX DeepSeek-R1 H200
SGLang 0.5.7 (TTFT against its published mean at 32 clients), GPUStack DeepSeek-V3.2 H200 SGLang 0.5.6.post2 DP8
(TPOT of a 32K-token burst, tok/s of a 2K one). Across a weight format: Kimi-K2.5 int4 on H200 SGLang 0.5.6.post2
priced from the fp8 row (sgl-cookbook, 100 clients of 1K + 1K: TPOT 403 ms measured, 33.4 ms priced, tok/s 32
against 370) and a 1,000-request burst of 128 + 4 tokens of DeepSeek-R1 fp8 on vLLM 0.11.0 from the Kimi int4 row
(TTFT 19.0 s against 2.5 s, 7.61 ×); its TTFT the larger miss of perf_calibrate.py's later group of Llama-3.1-8B bf16
on H200 SGLang 0.5.6.post2, priced by the Hopper SGLang MLA fp8 row (14.99 ×; TPOT 2.52, tok/s 2.80). The groups left
out of their row's refit miss by less in TPOT and tok/s (2.75, 2.74; their TTFT misses, up to 126 ×, are rows whose
clients queue for the pool, which the calibration prices without it). "kernel family" (same GPU class, engine and
quant mode): perf_calibrate.py's later group of Qwen3-235B-A22B-FP8 on H200 SGLang 0.5.6.post2, priced by the Hopper
SGLang MLA row. "other" (an engine or GPU class without a row, never measured borrowed): the largest of the others."""
WORST_SPECULATIVE = (2.71, 2.45, 2.61)
"""The largest miss, a ratio either way, of TTFT, TPOT and output tok/s per GPU priced with speculative decoding, on
the only published measurements of it kvplan prices (benchmarks/perf_published.py: the sgl-cookbook's GLM-5-FP8
with EAGLE on 8 × H200 SGLang, its acceptance length as printed, 3.50, at 100 clients of 1K + 1K: TPOT 36.5 ms
measured, 14.9 ms priced; TTFT 21.4 s against 7.9 s, the 48 running requests' queue). No coefficient row was fitted
on a speculative step (a target verify of D tokens a request and D draft passes), so a speculative deployment's
band is at least this wide."""
BAND = 1.5
"""A band is × / ÷ (1 + 1.5 × a measured MAPE): the row's held-out MAPE for its own deployments; a borrowed row's
twice as wide, at least as wide as the largest miss of a row borrowed that way (WORST_BORROWED)."""
BAND_HELD = (0.63, 0.68, 0.71)
"""The share of held-out TTFTs, TPOTs and throughputs inside their own row's band (benchmarks/perf_calibrate.py,
"measured inside kvplan's band": 251, 271 and 283 of 399 figures of the rows' own MoE groups, later and left out;
by row 54–73 %, 55–77 %, 53–75 %): a band is the error to expect about two times in three, not a bound."""


def borrow_kind(borrowed: str) -> str:
    """What ``coefficients_for``'s note says was borrowed: '' (the deployment's own row), 'weight format', 'engine
    version', 'kernel family' or 'other'."""
    if not borrowed:
        return ""
    if FORMAT in borrowed:
        return "weight format"
    if borrowed.endswith(VERSION_ONLY):
        return "engine version"
    return "kernel family" if borrowed.endswith(FAMILY_ONLY) else "other"


def band_mape(
    mape: tuple[float, float, float], borrowed: str, *, speculative: bool = False
) -> tuple[float, float, float]:
    """The relative half-width of each figure's band (TTFT, TPOT, throughput) from the row's held-out MAPE, what was
    borrowed (``coefficients_for``'s note, '' for the deployment's own row) and whether the steps are speculative
    (at least WORST_SPECULATIVE)."""
    kind = borrow_kind(borrowed)
    scale, worst = (2 * BAND, WORST_BORROWED[kind]) if kind else (BAND, (1.0, 1.0, 1.0))
    floors = (max(w, s) for w, s in zip(worst, WORST_SPECULATIVE, strict=True)) if speculative else worst
    got = [max(scale * m, w - 1) for m, w in zip(mape, floors, strict=True)]
    return (got[0], got[1], got[2])


def family_of(kinds: tuple[str, ...]) -> str:
    """The kernel family a model's attention kinds price under: MLA (and DSA) or the GQA family."""
    return "mla" if any(k in ("mla", "dsa") for k in kinds) else "gqa"


def coefficients_for(
    gpu_class: str, engine: str, version: str, family: str, quant: str = ""
) -> tuple[Coefficients, str]:
    """The row fitted for this GPU class, engine, version and family, else the nearest one and what was borrowed
    ('' when the row is the deployment's own): same class, engine and family at another version, then same class
    and engine, then same class, then any row. A row fitted on other GEMM quant modes than ``quant`` is borrowed too
    (``Coefficients.quants``). The row comes with ``quant``'s own efficiencies where it has them (``for_quant``)."""
    c, what = _nearest(gpu_class, engine, version, family)
    if quant and c.quants and quant not in c.quants:
        said = what or f"{c.key} for {gpu_class} / {engine} {version} / {family}"
        what = f"{said}; fitted on {' / '.join(c.quants)} {FORMAT} {quant}"
    return c.for_quant(quant), what


def _nearest(gpu_class: str, engine: str, version: str, family: str) -> tuple[Coefficients, str]:
    tiers = (
        (lambda c: c.gpu_class == gpu_class and c.engine == engine and c.family == family and c.covers(version), ""),
        (lambda c: c.gpu_class == gpu_class and c.engine == engine and c.family == family, "engine version"),
        (lambda c: c.gpu_class == gpu_class and c.engine == engine, "kernel family"),
        (lambda c: c.gpu_class == gpu_class, "engine and kernel family"),
        (lambda c: True, "GPU class, engine and kernel family"),
    )
    for match, what in tiers:
        for c in TABLE:
            if match(c):
                return c, (f"{c.key} for {gpu_class} / {engine} {version} / {family}: no row of its {what}"
                           if what else "")  # fmt: skip
    raise ValueError("kvplan.perf.coeffs.TABLE is empty")
