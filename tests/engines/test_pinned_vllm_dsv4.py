"""kvplan.engines.vllm_dsv4 pinned: what the DeepSeek-V4 plan says, figure by figure (mutation check).

The pages and groups are test_vllm_v4's, derived there from vllm-0.33.0 (``models/deepseek_v4/``,
``v1/core/kv_cache_planning.py _get_packed_kv_cache_groups``): DeepSeek-V4-Flash's 43 layers make 167 specs in 5
groups; the widest is the 62-spec group of 21 C4 compressed (37,440 B) + 20 C128 compressed (1,728 B) + 21 C4
indexer K (8,640 B) pages = 786,240 + 34,560 + 181,440 = 1,002,240 B a block id.
"""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from tests.engines.test_vllm_v4 import plan


def test_the_notes_carry_the_pages_and_groups() -> None:
    notes = plan("deepseek-v4-flash", tp=2).notes
    assert (
        "vLLM DeepSeek-V4 (0.33.0, fp8_ds_mla, block-outermost BLHNC layout): 167 cache specs in 5 KV cache groups"
        " packed into one block id pool (_get_packed_kv_cache_groups); one block id = the widest group's pages ="
        " 1,002,240 B (62 layers' pages)"
    ) in notes
    # every kind once, sorted by name: (block tokens, page after the 576 B padding)
    assert (
        "vLLM DeepSeek-V4 pages (block tokens, bytes after the 576 B padding): C128 compressed 256 tokens 1,728 B;"
        " C128 compressor state 8 tokens 32,832 B; C4 compressed 256 tokens 37,440 B; C4 compressor state 4 tokens"
        " 32,832 B; C4 indexer K 256 tokens 8,640 B; C4 indexer compressor state 4 tokens 8,640 B; window 128 64"
        " tokens 37,440 B"
    ) in notes
    # max_in_flight_tokens: 2 batches (async scheduling at pp 1) × max_num_batched_tokens 8,192 = 16,384
    assert any(n.startswith("vLLM sizes every window group") and "(16,384: max_in_flight_tokens" in n for n in notes)


@pytest.mark.parametrize(("gpu", "sm"), [("a100-80gb", 80), ("rtx-pro-6000", 120)])
def test_off_the_flashmla_path_is_refused(gpu: str, sm: int) -> None:
    # models/deepseek_v4/nvidia/model.py: SM12x takes FlashInfer, and FlashMLA (the fp8_ds_mla path kvplan read)
    # runs on SM90 / SM10x only; an SM80 or SM120 GPU is refused in one line naming its SM
    with pytest.raises(InputError, match=rf"DeepSeek-V4 off the FlashMLA path \(SM{sm}: only SM90 / SM10x planned\)"):
        plan("deepseek-v4-flash", tp=2, gpu=gpu)
