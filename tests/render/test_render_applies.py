"""kvplan.render.applies.for_model: a model without a DSA indexer loses its all-zero indexer fields in JSON, never
a non-zero figure; a DSA model keeps every field (issue 23, "Words for every model")."""

from __future__ import annotations

from kvplan.models.from_hf import load_model
from kvplan.render.applies import for_model

DATA = {
    "cell": {"main_bytes": 16_384, "indexer_bytes": 0, "draft_indexer_bytes": 0},
    "indexer_k_bytes_read_by_chunk": [0, 0],
    "memory_map": {"main KV": 1, "indexer": 0},
    "plans": [{"indexer_layers": 0, "main_layers": 32}],
}


def test_zero_indexer_fields_go_for_a_model_without_one() -> None:
    out = for_model(load_model("llama-3.1-8b"), DATA)
    assert out == {"cell": {"main_bytes": 16_384}, "memory_map": {"main KV": 1}, "plans": [{"main_layers": 32}]}


def test_a_non_zero_indexer_figure_is_never_hidden() -> None:
    out = for_model(load_model("llama-3.1-8b"), {"indexer_bytes": 132, "x": {"indexer": [0, 1]}})
    assert out == {"indexer_bytes": 132, "x": {"indexer": [0, 1]}}


def test_a_dsa_model_keeps_every_field() -> None:
    assert for_model(load_model("glm-5.3"), DATA) == DATA
