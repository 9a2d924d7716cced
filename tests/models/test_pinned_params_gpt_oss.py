"""gpt-oss parameter groups (kvplan/models/params_gpt_oss.py), each group derived from config.json and the totals
checked against OpenAI's gpt-oss model card (openai/gpt-oss-120b, -20b: "116.83B" and "20.91B" total parameters,
Table 1 of the gpt-oss model card, arXiv 2508.10925).

gpt-oss-120b config.json: hidden 2,880, 36 layers, 64 heads of 64, 8 kv heads, 128 experts of intermediate 2,880,
vocab 201,088, untied. vLLM ``model_executor/models/gpt_oss.py``: ``OAIAttention`` (q/k/v/o with biases, ``sinks``
one a head), ``MLPBlock`` (router Linear E × h + E bias; experts gate_up 2·I × h and down h × I with biases), two
RMSNorms a layer, the final norm, embed_tokens and lm_head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.mxfp4_moe import Mxfp4Experts
from kvplan.models.weights import param_groups_from_hf

DATA = Path(__file__).parents[1] / "data"
G120 = DATA / "hf" / "gpt-oss-120b" / "config.json"
G20 = DATA / "vllm_hybrid" / "gpt-oss-20b" / "config.json"


def _bf16(path: Path, **changes: Any) -> dict[str, Any]:
    # the same model with bf16 experts (no quantization_config), as unsloth/gpt-oss-120b-BF16 ships it
    cfg = {k: v for k, v in json.loads(path.read_text()).items() if k != "quantization_config"}
    return {**cfg, "torch_dtype": "bfloat16", **changes}


def _params(config: dict[str, Any]) -> dict[str, int]:
    return {g.name: g.params for g in param_groups_from_hf(config, "gpt-oss").groups}


def test_each_group_of_gpt_oss_120b() -> None:
    p = _params(_bf16(G120))
    # attention: q 64·64 × 2,880 and o 2,880 × 64·64 = 23,592,960, + q bias 4,096 + sinks 64 -> 23,597,120 × 36
    assert p["attention"] == 36 * (2 * 64 * 64 * 2_880 + 64 * 64 + 64) == 849_496_320
    # k and v: 8·64 × 2,880 each + their biases 2 × 512 -> 2,950,144 × 36
    assert p["kv_proj"] == 36 * (2 * 8 * 64 * 2_880 + 2 * 8 * 64) == 106_205_184
    # router: 128 × 2,880 + 128 bias, a layer
    assert p["router"] == 36 * (128 * 2_880 + 128) == 13_275_648
    # two RMSNorms a layer + the final one (73 × 2,880) and the o_proj biases (36 × 2,880)
    assert p["norms"] == 73 * 2_880 + 36 * 2_880 == 313_920
    # embed_tokens and lm_head, untied: 2 × 201,088 × 2,880
    assert p["embeddings"] == 2 * 201_088 * 2_880 == 1_158_266_880
    # experts: 128 × (gate_up 5,760 × 2,880 + down 2,880 × 2,880 + biases 5,760 + 2,880), a layer
    assert p["routed_experts"] == 36 * 128 * (3 * 2_880 * 2_880 + 3 * 2_880) == 114_701_598_720


@pytest.mark.parametrize(("path", "total"), [(G120, 116_829_156_672), (G20, 20_914_757_184)])
def test_totals_are_the_model_cards(path: Path, total: int) -> None:
    # 116.83B and 20.91B (the card rounds to 0.01B): the same with MXFP4 experts and with bf16 ones
    mxfp4 = param_groups_from_hf(json.loads(path.read_text()), "gpt-oss")
    assert mxfp4.total_params == param_groups_from_hf(_bf16(path), "gpt-oss").total_params == total


def test_mxfp4_experts_are_one_group_of_what_the_backend_holds() -> None:
    groups = param_groups_from_hf(json.loads(G120.read_text()), "gpt-oss").groups
    experts = [g for g in groups if isinstance(g, Mxfp4Experts)]
    assert len(experts) == 1
    e = experts[0]
    assert (e.params, e.experts, e.hidden, e.intermediate, e.moe_layers) == (114_701_598_720, 128, 2_880, 2_880, 36)
    assert (e.bytes_per_param_num, e.split) == (1, "experts")


def test_tied_embeddings_count_once() -> None:
    assert _params(_bf16(G120, tie_word_embeddings=True))["embeddings"] == 201_088 * 2_880 == 579_133_440


def test_head_dim_defaults_to_hidden_over_heads() -> None:
    # without head_dim: 2,880 // 64 = 45 a head; q and o 64·45 × 2,880 each, q bias 2,880 and 64 sinks
    cfg = {k: v for k, v in _bf16(G120).items() if k != "head_dim"}
    assert _params(cfg)["attention"] == 36 * (2 * 64 * 45 * 2_880 + 64 * 45 + 64) == 597_302_784


def test_no_vocab_size_counts_no_embeddings() -> None:
    cfg = {k: v for k, v in _bf16(G120).items() if k != "vocab_size"}
    assert _params(cfg).get("embeddings", 0) == 0  # a group of 0 parameters is left out


def test_a_vocab_of_0_counts_no_embeddings() -> None:
    # vocab_size 0 reads as the absent key does (minimum 0, not refused): no embed_tokens / lm_head rows
    assert _params(_bf16(G120, vocab_size=0)).get("embeddings", 0) == 0
