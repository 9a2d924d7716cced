"""The band's constants are the corpus' fit, each solved term reproduces its log, and README prints the held-out
figures the script prints (tests/runbook/config_alone/loso.py; issue 28 items 1 and 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines.band import ERRORS, fitted, plan_at
from tests.runbook.config_alone import all_cases, plan
from tests.runbook.config_alone.loso import (
    figures,
    fit,
    logged_weights,
    measured,
    shipped_is_fitted,
    source_of,
    table_literal,
)
from tests.runbook.config_alone.regenerate import BAND, ERRORS_BEGIN, ERRORS_END, in_readme

README = Path(__file__).parents[2] / "README.md"


def test_shipped_errors_are_the_corpus_fit() -> None:
    # a case added or a figure moved changes the fit: regenerate kvplan/engines/band.ERRORS (and README's blocks)
    # with python -m tests.runbook.config_alone --write
    assert shipped_is_fitted(), "engines/band.ERRORS is stale:\n" + table_literal(fit(measured()))


def test_each_solved_term_gives_back_its_logged_pool() -> None:
    # the term's true value, set into the plan (with the log's weights where it prints them), plans the pool the
    # log prints, to within one page or block (the secant lands on a page boundary's near side)
    for m in measured():
        if m.true is None:
            continue
        p = plan(m.case)
        weights = logged_weights(m.case)
        base = plan_at(p.arch, p, "weights_per_gpu", weights) if weights is not None else p
        got = plan_at(p.arch, base, m.term, m.true).logged_tokens
        page = p.page_tokens * p.dcp
        assert abs(got - m.case.logged) <= 2 * page, (m.case.label, got, m.case.logged)


def test_the_sources_leave_one_out_groups() -> None:
    # the llm-d planner sweep is one source however many variants it logged; SGLang PR 4760 and PR 11309 are two
    sources = {c.log.rsplit("/", 1)[-1]: source_of(c) for c in all_cases()}
    assert sources["vllm-llama-3.1-8b-h100-llmd-planner-tp1-kvfp8.log"] == "llmd-planner"
    assert sources["vllm-qwen3-8b-h100-llmd-planner-tp1.log"] == "llmd-planner"
    assert sources["sglang-llama-3.1-8b-h100-sglang-pr-4760.log"] == "sglang-pr-4760"
    assert sources["sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log"] == "sglang-pr-11309"
    assert sources["vllm-v0-rho-1b-h200-grpocredit-0.6.4.log"] == "grpocredit"


def test_one_thread_or_repository_is_one_source_under_any_file_name() -> None:
    # vllm-project/vllm#21348 quotes both engines' lines (the SGLang log under field/, the vLLM one a doctor log), and
    # ajith-sirra-amd/Issues holds both MI355X logs (Kimi-K2.5 and GLM-5-FP8): one source each, not two, or the
    # held-out band of one would be fitted on its twin; dariustanrd/tokenkaki's two runs (0.9.2, 0.19.1) are one
    sources = {c.log.rsplit("/", 1)[-1]: source_of(c) for c in all_cases()}
    assert (
        sources["doctor-vllm-qwen3-235b-fp8-h100-tp4-issue-21348.log"]
        == sources["sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log"]
    )
    assert (
        sources["doctor-sglang-0.5.9-glm-5-fp8-mi355x-rocm-preload-usage-ajith-sirra-amd-issues.log"]
        == sources["sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log"]
    )
    assert sources["vllm-qwen3-8b-a100-40gb-tokenkaki-0.9.2.log"] == "tokenkaki"
    assert sources["vllm-qwen3-8b-a100-40gb-tokenkaki-0.19.1.log"] == "tokenkaki"
    # kthxo/distserving's RTX 4090 and RTX 5090 journals: one repository, one source
    assert sources["vllm-qwen3-8b-rtx-4090-kthxo-distserving.log"] == "kthxo-distserving"
    assert sources["vllm-qwen3-8b-rtx-5090-kthxo-distserving.log"] == "kthxo-distserving"
    # the GPU token's tail drops the run token (tp4): the repository's name is the source
    assert sources["vllm-qwen3-coder-30b-a3b-l40s-tp4-aws-samples-claude-code-multi-model.log"] == (
        "aws-samples-claude-code-multi-model"
    )
    # LMCache's docs FAQ (LMCache/LMCache#1769): two rows of one table, one source, the corpus's twentieth
    faq = [source_of(c) for c in all_cases() if c.log.endswith("-lmcache-faq.log")]
    assert faq == ["lmcache-faq", "lmcache-faq"]
    assert len({source_of(c) for c in all_cases()}) >= 20


def test_readme_prints_the_held_out_figures() -> None:
    text = README.read_text(encoding="utf-8")
    block = "\n".join(figures().lines())
    assert block in text, f"README's leave-one-source-out figures are stale; the script prints:\n{block}"
    assert "python -m tests.runbook.config_alone --write" in text
    # and every case's held-out band, as the script prints it (regenerate: python -m tests.runbook.config_alone
    # --write)
    assert in_readme() == (True, True)


def test_the_generated_errors_block_is_ruff_formatted_source() -> None:
    # --write rewrites band.py between its markers with the literal table_literal gives: it must be what band.py
    # holds, so a rewrite leaves ruff format clean and the diff empty
    text = BAND.read_text(encoding="utf-8")
    assert ERRORS_BEGIN + table_literal(ERRORS) + "\n" + ERRORS_END in text


def test_each_held_out_band_leaves_its_own_source_out() -> None:
    # the vLLM 0.20.0 record (0.17-0.20, Hopper/Blackwell): without its source, its cell holds the llm-d planner
    # sweep alone (one source), so the band borrows its range on any GPU, which the A100 run of dariustanrd/tokenkaki
    # (0.19.1) makes two sources: the widest term error of those two sources, none of the records
    rows = measured()
    m = next(r for r in rows if r.source == "vllm-memory-estimator" and "0.20.0 (record), DeepSeek" in r.case.label)
    table = fit(r for r in rows if r.source != m.source)
    assert table[("vllm-v1", "0.17-0.20", "hopper-blackwell")].sources == 1
    fit_, why = fitted(m.family, m.version_range, m.gpu_class, table)
    others = [
        r.term_ppm
        for r in rows
        if (r.family, r.version_range) == ("vllm-v1", "0.17-0.20") and r.source != m.source and r.term_ppm is not None
    ]
    assert fit_ is not None and why.startswith("vLLM V1 0.17-0.20 on any GPU") and fit_.ppm == max(others)
    assert fit_.sources == 2 and "(record)" not in fit_.worst


@pytest.mark.parametrize("key", sorted(ERRORS))
def test_every_fitted_constant_names_its_data(key: tuple[str, str, str]) -> None:
    f = ERRORS[key]
    assert f.cases >= 1 and f.sources >= 1 and ": " in f.worst and f.ppm > 0
