"""Which corpus cell a band comes from (kvplan.engines.band.fitted): a cell is used where at least two sources
measured it, else the same family and version range on any GPU class, else the family's widest."""

from __future__ import annotations

import pytest

from kvplan.engines.band import ERRORS, MIN_SOURCES, Fitted, fitted, version_range

TABLE = {
    ("vllm-v1", "0.17-0.20", "hopper-blackwell"): Fitted(10_000, 9, 1, "one sweep: +1.0 %"),
    ("vllm-v1", "0.17-0.20", "*"): Fitted(200_000, 12, 2, "two sources: −20.0 %"),
    ("vllm-v1", "0.9-0.16", "amd"): Fitted(50_000, 3, 2, "two AMD sources: +5.0 %"),
    ("vllm-v1", "0.9-0.16", "*"): Fitted(60_000, 4, 2, "+6.0 %"),
    ("vllm-v1", "0.21+", "*"): Fitted(70_000, 1, 1, "one source: −7.0 %"),
    ("vllm-v1", "*", "*"): Fitted(300_000, 20, 4, "the family: −30.0 %"),
}


@pytest.mark.parametrize(
    ("rng", "cls", "ppm", "said"),
    [
        ("0.9-0.16", "amd", 50_000, "vLLM V1 0.9-0.16 on AMD: 3 case(s), 2 source(s)"),  # its own cell: 2 sources
        ("0.17-0.20", "hopper-blackwell", 200_000, "vLLM V1 0.17-0.20 on any GPU"),  # one source: the range
        ("0.21+", "ampere-ada", 300_000, "vLLM V1 on any GPU"),  # no cell, a one-source range: the family
        ("0.9-0.16", "consumer", 60_000, "vLLM V1 0.9-0.16 on any GPU"),  # no cell: the range
    ],
)
def test_a_thin_cell_borrows_from_a_wider_one(rng: str, cls: str, ppm: int, said: str) -> None:
    fit, why = fitted("vllm-v1", rng, cls, TABLE)
    assert fit is not None and fit.ppm == ppm and why.startswith(said)


def test_the_widest_level_is_used_even_from_one_source() -> None:
    table = {("vllm-v0", "*", "consumer"): Fitted(1, 2, 1, "x: +0.0 %"), ("vllm-v0", "*", "*"): Fitted(2, 2, 1, "y")}
    fit, _ = fitted("vllm-v0", "*", "hopper-blackwell", table)
    assert fit is not None and fit.ppm == 2
    assert fitted("sglang", "*", "amd", {}) == (None, "no SGLang case in the corpus")


@pytest.mark.parametrize(
    ("fam", "version", "rng"),
    [
        ("vllm-v1", "0.10.1.1", "0.9-0.16"),
        ("vllm-v1", "0.16.0", "0.9-0.16"),
        ("vllm-v1", "0.17.0", "0.17-0.20"),  # vllm_profile.TRITON_TOPK_TOPP_SINCE
        ("vllm-v1", "0.20.0", "0.17-0.20"),
        ("vllm-v1", "0.21.0", "0.21+"),  # versions.py: the CUDA-graph estimate enters the budget
        ("vllm-v1", "0.33.0", "0.21+"),
        ("sglang", "0.5.9", "*"),
        ("vllm-v0", "0.6.4", "*"),
    ],
)
def test_version_ranges(fam: str, version: str, rng: str) -> None:
    assert version_range(fam, version) == rng


def test_the_shipped_table_has_every_wider_cell() -> None:
    # each (family, range, class) cell comes with its (family, range, '*') and (family, '*', '*'): the ladder
    # always ends somewhere
    assert MIN_SOURCES == 2
    for fam, rng, _ in ERRORS:
        assert (fam, rng, "*") in ERRORS and (fam, "*", "*") in ERRORS
