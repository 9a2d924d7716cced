"""kvplan.engines.vllm_glm5_next pinned: what the GLM-5.3-Flash plan says, figure by figure (mutation check).

The figures are test_vllm_glm5_next's, derived there from vllm 0.33.0 (``models/glm5next/``,
``v1/core/kv_cache_planning.py``): at tp 8, 11 MLA layers (each with its pooled indexer K: 22 specs in the one MLA
+ indexer group), 34 KDA layers in 4 groups of 3 blocks a request ('align': 2 + one FlashKDA checkpoint), 11 tail
rings in 1 group of 1 block; block 1,152 tokens; one block id 6,906,240 B rounded to lcm(512, 4,224) = 6,910,464 B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError, PlanError
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


def test_the_notes_name_the_pooled_keys_and_the_speculative_state_blocks() -> None:
    # Glm5NextIndexerCache (tokens_per_state = index_kpool 4): a 1,152-token block holds 1,152 / 4 = 288 pooled
    # keys of 132 B = 38,016 B; MambaSpec 'align' with num_speculative_tokens 1: 2 + 1 checkpoint + 1 = 4 blocks
    assert any("(589,824 + 38,016 B: 288 pooled keys of 132 B)" in n for n in _plan().notes)
    assert any(
        "4 blocks per KDA group (mamba_cache_mode 'align': 2 + one FlashKDA prefill checkpoint + 1 speculative;" in n
        for n in _plan("speculative_num_draft_tokens=1").notes
    )


def test_the_kv_dtype_knob_says_whether_it_was_set() -> None:
    # the deployment sets kv_cache_dtype fp8 (--kv-cache-dtype fp8); without it vLLM's 'auto' is the model dtype
    assert _plan().knob("kv_cache_dtype").origin == "set"
    k = _plan("kv_cache_dtype=auto").knob("kv_cache_dtype")
    assert (k.value, k.origin) == ("auto", "default: auto = the model dtype (bf16)")


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


# A second Glm5Next config: GLM-5.3-Flash's preset with index_kpool 8 (tp 8, fp8 rows of 512 B, KDA page 542,720 B
# at tp 8, 34 KDA + 11 MLA layers as above). By hand from vLLM 0.33.0:
# - block (``_align_hybrid_block_size``): 128 × cdiv(542,720, 128 × 512) = 1,152 tokens, then a multiple of the
#   backends' smallest kernel blocks: lcm(64, the Glm5NextIndexerBackend's smallest kpool × 32 = 256
#   (``get_supported_kernel_block_sizes``: [index_kpool × n for n in get_paged_mqa_page_sizes() = (32, 64)]), ring 1)
#   = 256 → 256 × cdiv(1,152, 256) = 1,280 tokens (a preliminary block of 256, the smallest size every backend
#   accepts, gives lcm(256, 16) × cdiv(542,720, 256 × 512) = 256 × 5 = 1,280 as well); the ring is 8 slots;
# - pages: MLA 1,280 × 512 = 655,360 B; indexer 1,280 / 8 × 132 = 21,120 B; ring 8 × 2 × 128 × 2 = 4,096 B;
# - ``_get_packed_kv_cache_groups``: repeats _approximate_gcd([34, 11, 11], 11) = 12 (as above); the MLA + indexer
#   bucket one group of 11 × (655,360 + 21,120) = 7,441,280 B (the anchor); KDA max(cdiv(34, 12),
#   cdiv(34, 7,441,280 // 655,360 = 11)) = 4 groups; the ring cdiv(11, 12) = 1 group;
# - ``_get_kv_cache_bytes_per_block`` (block-outermost): round_up(7,441,280, lcm(512 (one row), the indexer's kernel
#   block gcd(8 × 64, 1,280) = 256 tokens < 1,280: 256 / 8 × 132 = 4,224 B) = 16,896) = 441 × 16,896 = 7,451,136 B.
def _kpool_8(tmp_path):  # type: ignore[no-untyped-def]
    import yaml

    doc = yaml.safe_load(Path("kvplan/configs/models/glm-5.3-flash.yaml").read_text())
    doc["name"] = "glm-5.3-flash-kpool8"
    doc["config"]["text_config"]["index_kpool"] = 8
    path = tmp_path / "glm-5.3-flash-kpool8.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_model(str(path))


def test_a_kpool_of_8_raises_the_block_to_a_multiple_of_256(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = plan_pool(_kpool_8(tmp_path), load_deployment("glm-5.3-8xh200-vllm"))
    assert p.page_tokens == 1_280
    assert p.extras["kv_cache_groups"] == 1 + 4 + 1
    assert p.extras["bytes_per_block"] == 7_451_136
    assert any("(a state page 542,720 B padded to 655,360 B)" in n for n in p.notes)


def test_the_ring_bucket_splits_by_the_repeats_and_can_be_the_widest() -> None:
    # vLLM's packer on synthetic pages (no served GLM-5.3-Flash config reaches them: a 256 B row, a 128-slot ring):
    # block 128, row 256 → MLA page 32,768 B; indexer (kpool 4) 128 / 4 × 132 = 4,224 B; ring 128 × 2 × 128 × 2 =
    # 65,536 B; 2 MLA layers, 6 KDA layers. ``_get_packed_kv_cache_groups``: repeats _approximate_gcd([6, 2, 2], 2)
    # = 2 (padding 0); the ring bucket (CircularBufferSpec, an AttentionSpec: ``num_groups_for``, no mamba cap) is
    # cdiv(2, 2) = 1 group of 2 × 65,536 = 131,072 B, the widest of all buckets, so anchor_bytes = 131,072; KDA
    # max(cdiv(6, 2), cdiv(6, 131,072 // 32,768 = 4)) = 3 groups of 2 states (65,536 B); MLA + indexer 1 group of
    # 2 × 36,992 = 73,984 B. ``_get_kv_cache_bytes_per_block``: the widest group 131,072 B, round_up to lcm(256, 1
    # (the indexer's kernel block gcd(256, 128) = 128 is the whole block)) = 131,072 B.
    from kvplan.engines.vllm_glm5_next import _Buckets, _pack
    from kvplan.models.cache import IndexerK, LinearState

    state = LinearState("kda", 8, 8, 128, 128, 4)
    p = _pack(_Buckets(state, IndexerK(128, 4), n_state=6, n_mla=2, n_draft=0, spec=0, mamba_page=0), 256, 128, 128)
    assert (p.mla_page, p.idx_page, p.ring_page) == (32_768, 4_224, 65_536)
    assert (p.attn_groups, p.state_groups, p.ring_groups) == (1, 3, 1)
    assert (p.widest, p.idx_align, p.bytes_per_block) == (131_072, 1, 131_072)
    # one MLA layer, three KDA layers: repeats 1, the anchor the lone ring page 65,536 B (> 32,768 + 4,224), KDA
    # max(cdiv(3, 1), cdiv(3, 65,536 // 32,768 = 2)) = 3 groups of one state
    p = _pack(_Buckets(state, IndexerK(128, 4), n_state=3, n_mla=1, n_draft=0, spec=0, mamba_page=0), 256, 128, 128)
    assert (p.attn_groups, p.state_groups, p.ring_groups, p.bytes_per_block) == (1, 3, 1, 65_536)


@pytest.mark.parametrize(("spec", "block"), [(125, 2560), (126, 2688)])
def test_a_block_that_is_not_a_whole_number_of_tail_rings_is_refused(spec: int, block: int) -> None:
    # Glm5NextTailCache.get_kv_cache_spec asserts cache_config.block_size is a multiple of the ring, kpool (4) ×
    # next_power_of_2(cdiv(kpool + S, kpool)): S 125 and 126 give cdiv(129 or 130, 4) = 33 -> 64, a 256-slot ring.
    # The block (_align_hybrid_block_size) is 128 × cdiv(KDA page, 128 × 512 B a token): the KDA page, 542,720 B at
    # S 0, grows 6,144 B a conv column (q, k, v: 3 × 8 heads × 128 × 2 B at tp 8): S 125: 1,310,720 B -> 20 × 128 =
    # 2,560 tokens, 10 rings; S 126: 1,316,864 B -> 21 × 128 = 2,688 tokens, 2,688 % 256 = 128: refused, though
    # 2,688 is a whole number of kpool 4
    sets = (f"speculative_num_draft_tokens={spec}",)
    if block % 256 == 0:
        assert _plan(*sets).page_tokens == block
        return
    with pytest.raises(PlanError, match=rf"block_size \({block}\) must be a multiple of the tail ring \(256\)"):
        _plan(*sets)
