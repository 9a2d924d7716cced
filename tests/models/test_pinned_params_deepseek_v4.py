"""DeepSeek-V4's parameter groups (kvplan/models/params_deepseek_v4.py), pinned where the mutation check moved a rule
deepseek-ai's DeepSeek-V4-Flash config.json (tests/data/hf/deepseek-v4-flash: hidden 4,096, vocab 129,280, 43
layers + 1 MTP, 44 ``compress_ratios`` ending 4, 128, 4, 0) does not reach: a tied vocabulary, and MTP layers past
the end of ``compress_ratios``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.models.weights import param_groups_from_hf

FLASH = Path(__file__).parents[1] / "data" / "hf" / "deepseek-v4-flash" / "config.json"


def _groups(**changes: Any) -> dict[str, int]:
    cfg = {**json.loads(FLASH.read_text()), **changes}
    return {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}


def test_tied_embeddings_are_one_vocab_matrix() -> None:
    # embed and head share one 129,280 × 4,096 matrix when tie_word_embeddings: 529,530,880 (twice untied)
    assert _groups(tie_word_embeddings=True)["embeddings"] == 529_530_880
    assert _groups()["embeddings"] == 2 * 529_530_880


def test_an_mtp_layer_past_the_compress_ratios_has_no_compressor() -> None:
    # MTP block k is layer 43 + k: entry 43 is 0 (window only) and a second MTP block, layer 44, is past the
    # 44-entry list: 0 as well (no compressor, no indexer), so two MTP blocks are twice one
    assert _groups(num_nextn_predict_layers=2)["mtp"] == 2 * _groups()["mtp"]
