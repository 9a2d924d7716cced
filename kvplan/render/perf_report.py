"""`kvplan perf`'s report: latency and throughput of a closed-loop load, each figure with its band and its basis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.perf.coeffs import BAND, BAND_HELD
from kvplan.render import Report, Section

if TYPE_CHECKING:  # the command loads it
    from kvplan.perf.predict import Band, PerfResult

_LATENCY = (("ttft", "TTFT median"), ("ttft_p90", "TTFT p90"), ("tpot", "TPOT median"), ("tpot_p90", "TPOT p90"),
            ("itl", "ITL median"), ("e2e", "end-to-end median"), ("e2e_p90", "end-to-end p90"))  # fmt: skip


def _ms(us: int) -> float:
    return round(us / 1000, 3)


def _fields(name: str, b: Band, scale: Any) -> dict[str, float]:
    return {name: scale(b.value), f"{name}_low": scale(b.low), f"{name}_high": scale(b.high)}


def perf_data(r: PerfResult) -> dict[str, Any]:
    c = r.coefficients
    data: dict[str, Any] = {
        "model": r.model, "engine": r.engine, "engine_version": r.engine_version, "gpu": r.gpu, "gpus": r.gpus,
        "isl": r.isl, "osl": r.osl, "concurrency": r.concurrency, "rate_per_s": r.rate_per_s, "trace": r.trace,
        "range_ratio": r.range_ratio, "num_prompts": r.num_prompts,
        "running_cap": r.running_cap, "running_cap_from": r.running_cap_from, "peak_running": r.peak_running,
        "pool_tokens": r.pool_tokens, "preemptions": r.preemptions,
        "budget_tokens": r.budget_tokens, "budget_from": r.budget_from, "gemm_quant": r.quant,
        "expert_gemm_quant": r.expert_quant or None, "attention_gemm_quant": r.attention_quant or None,
        "coefficients": {"row": c.key, "fitted_on": c.fitted_on, "heldout_mape_ttft": r.heldout[0],
                         "heldout_mape_tpot": r.heldout[1], "heldout_mape_throughput": r.heldout[2],
                         "heldout_mape_of": r.heldout_of,
                         "gemm_eff": c.gemm_eff, "attention_eff": c.attention_eff, "mem_eff": c.mem_eff,
                         "link_eff": c.link_eff, "comm_us": c.comm_us, "layer_us": c.layer_us,
                         "request_us": c.request_us},
        "borrowed": r.borrowed or None, "peaks_source": r.peaks_source, "assumptions": list(r.assumptions),
    }  # fmt: skip
    a = r.acceptance
    data |= {"verify_tokens": a.verify_tokens if a else None, "acceptance_length": a.milli / 1000 if a else None,
             "acceptance_length_low": a.low_milli / 1000 if a else None,
             "acceptance_length_high": a.high_milli / 1000 if a else None,
             "acceptance_from": a.source if a else None}  # fmt: skip
    for key, _ in _LATENCY:
        data |= _fields(f"{key}_ms", r.us[key], _ms)
    for key in ("output", "total"):
        data |= _fields(f"{key}_tokens_per_s_per_gpu", r.tokens_per_s_per_gpu[key], int)
    return data


def _acceptance_row(r: PerfResult) -> tuple[str, str, str]:
    a = r.acceptance
    if a is None:
        return ("speculative decoding", "none", "speculative_num_draft_tokens 0")
    band = "" if a.given else f" (band {a.low_milli / 1000:.2f} – {a.high_milli / 1000:.2f})"
    return ("acceptance length", f"{a.milli / 1000:.2f} tokens a step{band}, {a.verify_tokens} verified", a.source)


def _spread(r: PerfResult) -> str:
    return f" (means, lengths from {r.range_ratio:g} × nominal)" if r.range_ratio < 1 else ""


def perf_report(r: PerfResult) -> Report:
    rows = [(label, f"{r.us[k].value / 1000:,.1f} ms", f"{r.us[k].low / 1000:,.1f} – {r.us[k].high / 1000:,.1f} ms")
            for k, label in _LATENCY]  # fmt: skip
    for key, label in (("output", "output tok/s per GPU"), ("total", "total tok/s per GPU")):
        b = r.tokens_per_s_per_gpu[key]
        rows.append((label, f"{b.value:,}", f"{b.low:,} – {b.high:,}"))
    c = r.coefficients
    basis = (
        (
            "running set",
            f"{r.peak_running:,} at most ({r.running_cap:,} of whole length fit at once)",
            r.running_cap_from,
        ),
        (
            "preemptions",
            f"{r.preemptions:,}",
            f"KV pool {r.pool_tokens:,} tokens; "
            + (
                "vLLM V1: newest running request preempted, recomputed"
                if r.engine == "vllm"
                else "SGLang: retract_decode, recomputed"
            ),
        ),
        ("prefill budget", f"{r.budget_tokens:,} tokens a step", r.budget_from),
        ("coefficients", c.key, c.fitted_on),
        (
            "held-out MAPE",
            f"TTFT {r.heldout[0]:.0%}, TPOT {r.heldout[1]:.0%}, tok/s {r.heldout[2]:.0%}",
            f"on {r.heldout_of}; band: × / ÷ (1 + {BAND:g} × these), which held "
            + " / ".join(f"{h:.0%}" for h in BAND_HELD)
            + " of held-out figures; borrowed: 2 × these, at least the largest miss of a row borrowed so",
        ),
        ("peaks", r.gpu, r.peaks_source),
        _acceptance_row(r),
    )
    title = (f"{r.model} on {r.gpus} × {r.gpu}, {'SGLang' if r.engine == 'sglang' else 'vLLM'} {r.engine_version}: "
             + (f"trace of {r.num_prompts:,} requests, isl mean {r.isl:,}, osl mean {r.osl:,}" if r.trace else
                f"isl {r.isl:,}, osl {r.osl:,}{_spread(r)}, "
                + (f"rate {r.rate_per_s:g}/s" if r.rate_per_s else f"concurrency {r.concurrency:,}")))  # fmt: skip
    return Report(
        command="perf",
        title=title,
        sections=(
            Section("latency and throughput (estimated)", tuple(rows), ("figure", "value", "band")),
            Section("how it was obtained", basis, ("term", "value", "from")),
        ),
        data=perf_data(r),
        notes=((f"borrowed coefficients: {r.borrowed}",) if r.borrowed else ()) + r.assumptions,
    )
