"""kvplan.engines.vllm_glm5_next pinned: what the GLM-5.3-Flash plan says, figure by figure (mutation check).

The figures are test_vllm_glm5_next's, derived there from vllm 0.33.0 (``models/glm5next/``,
``v1/core/kv_cache_planning.py``): at tp 8, 11 MLA layers (each with its pooled indexer K: 22 specs in the one MLA
+ indexer group), 34 KDA layers in 4 groups of 3 blocks a request ('align': 2 + one FlashKDA checkpoint), 11 tail
rings in 1 group of 1 block; block 1,152 tokens; one block id 6,906,240 B rounded to lcm(512, 4,224) = 6,910,464 B.
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def _plan(*sets: str):  # type: ignore[no-untyped-def]
    return plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-vllm", list(sets)))


def test_the_chain_names_the_groups_and_the_block() -> None:
    terms = {t.label: t for t in _plan().chain}
    assert terms["KV cache groups"].detail == (
        "1 × MLA + indexer K (kpool 4) group (22 layers): cdiv(tokens, 1152) blocks per group; 4 × KDA state groups"
        " (34 layers): 3 blocks per group whatever the length (align); 1 × indexer tail ring group (11 layers): 1"
        " blocks per group whatever the length (align)"
    )
    assert terms["bytes per block"].bytes == 6_910_464
    assert terms["bytes per block"].detail == (
        "the widest of 6 packed KV cache groups: 22 specs' pages (block-outermost layout, 1152-token attention block)"
    )


def test_the_backend_set_as_vllm_picks_it_plans() -> None:
    p = _plan("attention_backend=FLASHINFER_MLA_SPARSE_SM90")
    k = p.knob("attention_backend")
    assert (k.value, k.origin) == ("FLASHINFER_MLA_SPARSE_SM90", "set")
    assert p.extras["bytes_per_block"] == 6_910_464


def test_another_backend_is_refused() -> None:
    with pytest.raises(
        InputError, match=r"GLM-5\.3-Flash with attention backend FLASHMLA_SPARSE \(.*\) on vLLM 0\.33\.0"
    ):
        _plan("attention_backend=FLASHMLA_SPARSE")


def test_the_mtp_note_counts_the_draft_layer() -> None:
    # 1 draft token: the MTP layer's MLA joins (11 + 1 MLA layers); the ring holds 4 × next_power_of_2(cdiv(4 + 1,
    # 4) = 2) = 8 slots
    notes = _plan("speculative_num_draft_tokens=1").notes
    assert any(
        n.startswith("speculative decoding (glm5_next_mtp, num_speculative_tokens 1): the MTP layer's MLA, indexer and")
        and "(11 + 1 MLA layers)" in n
        and "the tail ring holds 8 slots (4 × next_power_of_2(cdiv(4 + 1, 4)))" in n
        for n in notes
    )


def test_an_mla_layer_without_its_indexer_is_refused() -> None:
    # vLLM's Glm5Next MLA layers each build a Glm5NextIndexerCache beside the MLA page (models/glm5next/); a config
    # whose MLA layer has no indexer is not the layout kvplan packs: one line, exit 2
    from dataclasses import replace

    from kvplan.models.cache import IndexerK

    arch = load_model("glm-5.3-flash")
    i = next(n for n, layer in enumerate(arch.layers) if layer.indexer is not None)
    bare = replace(arch.layers[i], caches=tuple(c for c in arch.layers[i].caches if not isinstance(c, IndexerK)))
    odd = replace(arch, layers=(*arch.layers[:i], bare, *arch.layers[i + 1 :]))
    with pytest.raises(InputError, match="without one KDA shape and an indexer on every MLA layer"):
        plan_pool(odd, load_deployment("glm-5.3-8xh200-vllm"))
