"""The coefficient table's envelope: which row prices a deployment, when it is borrowed (GPU class, engine version,
kernel family, GEMM quant mode), and how wide a borrowed row's band is."""

from __future__ import annotations

import pytest

from kvplan.perf.coeffs import (
    BAND_HELD,
    TABLE,
    WORST_BORROWED,
    WORST_SPECULATIVE,
    band_mape,
    borrow_kind,
    coefficients_for,
)


def test_a_row_fitted_on_the_deployments_quant_is_its_own() -> None:
    # hopper / sglang 0.5.9 / mla was fitted on DeepSeek-R1 and GLM-5 at fp8 (benchmarks/perf_calibrate.py: "GEMMs
    # fp8"): an fp8 deployment of SGLang 0.5.9 on H200 is inside its envelope, and no quant given checks none
    row, said = coefficients_for("hopper", "sglang", "0.5.9", "mla", "fp8")
    assert (row.gpu_class, row.engine, row.family, row.quants) == ("hopper", "sglang", "mla", ("fp8",)) and said == ""
    assert coefficients_for("hopper", "sglang", "0.5.9", "mla") == (row, "")


def test_another_quant_borrows_the_row_and_says_which() -> None:
    # the same row for NVFP4 experts: its kernels were never measured under it (left out: Kimi-K2.5 B200 int4 → NVFP4
    # TPOT 72.5 %), so the row is borrowed and the note names both
    row, said = coefficients_for("hopper", "sglang", "0.5.9", "mla", "fp4")
    assert row.quants == ("fp8",)
    assert said == "hopper / sglang 0.5.9-0.5.9 / mla for hopper / sglang 0.5.9 / mla; fitted on fp8 GEMMs, not fp4"
    # a version outside the row and another quant: both said, the version first
    row, said = coefficients_for("hopper", "vllm", "0.33.0", "mla", "fp8")
    assert row.quants == ("int4",) and said == (
        "hopper / vllm 0.16.0-0.16.0 / mla for hopper / vllm 0.33.0 / mla: no row of its engine version; "
        "fitted on int4 GEMMs, not fp8"
    )
    # a row fitted on two formats takes either as its own: Blackwell vLLM MLA (Kimi-K2.5 int4 and NVFP4)
    assert coefficients_for("blackwell", "vllm", "0.17.0", "mla", "int4")[1] == ""
    assert coefficients_for("blackwell", "vllm", "0.17.0", "mla", "fp4")[1] == ""


def test_every_row_names_the_quants_it_was_fitted_on() -> None:
    # perf_calibrate's "GEMMs" per row (2026-12-07): Hopper SGLang fp8; Blackwell SGLang fp4 / fp8; Hopper vLLM MLA
    # int4; Blackwell vLLM MLA fp4 / int4; both vLLM GQA rows fp4 (gpt-oss-120b)
    assert [r.quants for r in TABLE] == [("fp8",), ("fp4", "fp8"), ("int4",), ("fp4", "int4"), ("fp4",), ("fp4",)]


def test_a_borrowed_band_covers_the_largest_miss_of_a_row_borrowed_that_way() -> None:
    # own: 1.5 × the held-out MAPE
    assert band_mape((0.1, 0.2, 0.3), "") == (1.5 * 0.1, 1.5 * 0.2, 1.5 * 0.3)
    # borrowed: max(2 × 1.5 × MAPE, the largest miss − 1) by what was borrowed, the misses
    # benchmarks/perf_published.py prints (rounded up): across an engine version alone (InferenceX B6 TTFT 1.84,
    # GPUStack D6 TPOT 1.93, D4 tok/s 1.45), across a weight format (Kimi-K2.5 int4 on SGLang priced from the fp8
    # row: E3 TPOT 12.10, tok/s 11.68; its TTFT perf_calibrate.py's Llama-3.1-8B bf16 group on the fp8 row, 14.99)
    assert WORST_BORROWED["engine version"] == (1.84, 1.93, 1.45)
    assert WORST_BORROWED["weight format"] == (14.99, 12.10, 11.68)
    version = "blackwell / vllm 0.15.1-0.17.0 / mla for blackwell / vllm 0.33.0 / mla: no row of its engine version"
    assert borrow_kind(version) == "engine version" and borrow_kind("") == ""
    got = band_mape((0.1, 0.2, 0.3), version)  # TTFT max(0.3, 0.84), TPOT max(0.6, 0.93), tok/s max(0.9, 0.45)
    assert got == pytest.approx((0.84, 0.93, 0.9))
    assert band_mape((0.1, 5.0, 7.0), version) == pytest.approx((0.84, 15.0, 21.0))  # each its own MAPE's
    quant = version + "; fitted on fp4 / int4 GEMMs, not fp8"  # a weight format too: the weight format's
    assert borrow_kind(quant) == "weight format"
    assert band_mape((0.1, 0.2, 0.3), quant) == pytest.approx((13.99, 11.10, 10.68))
    assert band_mape((5.0, 0.2, 0.3), quant)[0] == pytest.approx(15.0)  # 2 × 1.5 × 5.0 over 13.99
    # speculative steps (no row fitted on them): at least the published GLM-5 EAGLE miss, × / ÷ 2.71 / 2.45 / 2.61
    assert WORST_SPECULATIVE == (2.71, 2.45, 2.61)
    assert band_mape((0.1, 0.2, 0.3), "", speculative=True) == pytest.approx((1.71, 1.45, 1.61))
    assert band_mape((0.1, 0.2, 0.3), version, speculative=True) == pytest.approx((1.71, 1.45, 1.61))
    assert band_mape((0.1, 0.2, 0.3), quant, speculative=True) == pytest.approx((13.99, 11.10, 10.68))
    family = "blackwell / sglang 0.5.6-0.5.9 / mla for blackwell / sglang 0.5.9 / gqa: no row of its kernel family"
    assert borrow_kind(family) == "kernel family"
    other = family.replace("kernel family", "engine and kernel family")
    assert borrow_kind(other) == "other"
    # an engine or GPU class without a row, never measured borrowed: each figure's largest of the measured kinds
    assert WORST_BORROWED["other"] == (14.99, 12.10, 11.68)
    assert band_mape((0.0, 0.0, 0.0), other) == pytest.approx((13.99, 11.10, 10.68))
    assert band_mape((0.0, 0.0, 0.0), family) == pytest.approx(tuple(w - 1 for w in WORST_BORROWED["kernel family"]))


def test_the_nearest_row_by_tier_and_its_key_names_the_versions_it_spans() -> None:
    # SGLang on Blackwell has no GQA row: the same class and engine's (MLA) row, its key "0.5.6-0.5.9" (first-last)
    row, said = coefficients_for("blackwell", "sglang", "0.5.9", "gqa")
    assert row.key == "blackwell / sglang 0.5.6-0.5.9 / mla"
    assert (
        said == "blackwell / sglang 0.5.6-0.5.9 / mla for blackwell / sglang 0.5.9 / gqa: no row of its kernel family"
    )
    # an engine with no row on Hopper: the class's first row (TABLE order: Hopper SGLang MLA)
    row, said = coefficients_for("hopper", "trtllm", "1.2.0", "gqa")
    assert row.key == "hopper / sglang 0.5.9-0.5.9 / mla" and said.endswith("no row of its engine and kernel family")
    # a vLLM version past the Blackwell MLA row's 0.15.1-0.17.0: the same row, said as a version borrowed
    row, said = coefficients_for("blackwell", "vllm", "0.33.0", "mla", "fp4")
    assert (
        said == "blackwell / vllm 0.15.1-0.17.0 / mla for blackwell / vllm 0.33.0 / mla: no row of its engine version"
    )
    # a GPU class with no row at all: the table's first row
    assert coefficients_for("ampere", "vllm", "0.18.0", "gqa")[0] is TABLE[0]


def test_the_band_says_how_often_it_held() -> None:
    # benchmarks/perf_calibrate.py, "measured inside kvplan's band", summed over the six rows' own MoE groups (later
    # and left out, 399 figures each): TTFT 82 + 30 + 41 + 19 + 68 + 11 = 251, TPOT 107 + 33 + 32 + 23 + 65 + 11 =
    # 271, tok/s 113 + 36 + 31 + 22 + 70 + 11 = 283
    assert tuple(round(n / 399, 2) for n in (251, 271, 283)) == BAND_HELD
    # and the report says it beside the rule (kvplan.render.perf_report)
    from kvplan.cli._common import load_plan
    from kvplan.perf.predict import perf
    from kvplan.render.perf_report import perf_report

    plan = load_plan("glm-5.3", "glm-5.3-8xh200-sglang", [])
    report = perf_report(perf(plan.arch, plan, isl=1024, osl=64, concurrency=1))
    text = " ".join(str(cell) for row in report.sections[1].rows for cell in row)
    assert "band: × / ÷ (1 + 1.5 × these), which held 63% / 68% / 71% of held-out figures" in text
