"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/arch.py.

The indexer layers follow SGLang's ``dsa_layer_skips_topk`` (``srt/configs/model_config.py``): a layer computes
its own top-k (owns an indexer K) unless ``index_topk_pattern`` marks it "S", or, with ``index_topk_freq`` f > 1,
``max(i - offset + 1, 0) % f != 0`` (with ``index_skip_topk_offset``), else ``max(i - 1, 0) % f != 0``.
"""

from __future__ import annotations

from kvplan.models.arch import IndexerRule, Split, full_indexer_layers


def _full(flags: tuple[bool, ...]) -> list[int]:
    return [i for i, f in enumerate(flags) if f]


def test_freq_4_without_offset() -> None:
    # max(i - 1, 0) % 4 == 0: i = 0 (max(-1, 0) = 0), and i - 1 in {0, 4, ..., 76}, i.e. i in {1, 5, ..., 77}
    # (20 layers) → 21 of 78
    flags, rule = full_indexer_layers(78, freq=4)
    assert rule is IndexerRule.FREQ
    assert _full(flags) == [0, *range(1, 78, 4)]
    assert sum(flags) == 21


def test_freq_4_offset_3_is_glm_52s_21_of_78() -> None:
    # GLM-5.2 (index_topk_freq 4, index_skip_topk_offset 3): max(i - 2, 0) % 4 == 0 → layers 0, 1, 2, then
    # 6, 10, ..., 74: "layers that COMPUTE top-k (21 of 78): 0, 1, 2, 6, 10, ..., 74" as a public profile of the
    # checkpoint evaluates SGLang's rule
    flags, _ = full_indexer_layers(78, freq=4, offset=3)
    assert _full(flags) == [0, 1, 2, *range(6, 78, 4)]
    assert sum(flags) == 21


def test_freq_1_every_layer_and_offset_1() -> None:
    # freq 1: every layer computes (SGLang returns False from `if freq <= 1`)
    assert all(full_indexer_layers(5)[0])
    # offset 1: max(i, 0) % 2 == 0 → 0, 2, 4
    assert _full(full_indexer_layers(5, freq=2, offset=1)[0]) == [0, 2, 4]


def test_pattern_letters() -> None:
    # index_topk_pattern: "F" full, "S" shared
    flags, rule = full_indexer_layers(4, pattern="FSSF")
    assert (flags, rule) == ((True, False, False, True), IndexerRule.PATTERN)


def test_split_of_a_layout() -> None:
    # attention tp / dp_attention (DP attention replicates attention on each DP rank); experts max(tp, ep)
    assert Split.of(tp=8, dp_attention=4, ep=2) == Split(tp=8, attention=2, experts=8, pp=1)
    assert Split.of(tp=2, ep=8, pp=3) == Split(tp=2, attention=2, experts=8, pp=3)
    # dp_attention past tp still leaves one attention way; pp 0 reads as 1 stage
    assert Split.of(tp=2, dp_attention=4, pp=0) == Split(tp=2, attention=1, experts=2, pp=1)
    assert Split.of(tp=4).ways("none") == 1
