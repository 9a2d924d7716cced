"""Issue 25: every model dimension and per-layer list checked where the config is read (kvplan.models.validate).

Each case was accepted and planned before (or divided by zero in the vLLM hybrid planner, exit 4); now it is one
ConfigError naming the file and the key (exit 2). The valid presets load unchanged (tests/models/test_hybrid_models.py
and the goldens keep their figures).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model

PRESETS = Path(__file__).resolve().parents[2] / "kvplan" / "configs" / "models"


def _write(tmp_path: Path, preset: str, edit: dict[str, Any]) -> str:
    doc = yaml.safe_load((PRESETS / f"{preset}.yaml").read_text())
    cfg = doc["config"]
    for key, value in edit.items():
        if "." in key:  # one level down, e.g. linear_attn_config.full_attn_layers
            outer, inner = key.split(".")
            cfg[outer] = {**cfg[outer], inner: value}
        elif value is _DROP:
            cfg.pop(key)
        else:
            cfg[key] = value
    path = tmp_path / f"{preset}-edited.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


_DROP = object()
_GLM_LAYERS = 78  # glm-5.3 num_hidden_layers


@pytest.mark.parametrize(
    ("preset", "edit", "key"),
    [
        # a zero count or width the engines divide or allocate by (issue 25's rows)
        ("glm-5.3", {"index_n_heads": 0}, "config.index_n_heads"),
        ("glm-5.3", {"num_key_value_heads": 0}, "config.num_key_value_heads"),
        ("glm-5.3", {"intermediate_size": 0}, "config.intermediate_size"),
        ("glm-5.3", {"moe_intermediate_size": 0}, "config.moe_intermediate_size"),
        # SGLang is_deepseek_nsa: the key present makes it DSA, so 0 is not "no indexer"
        ("glm-5.3", {"index_topk": 0}, "config.index_topk"),
        ("gpt-oss-120b", {"num_local_experts": 0}, "config.num_local_experts"),
        # per-layer lists: exactly one known word a layer, also where kvplan does not read the list
        ("glm-5.3", {"layer_types": ["full_attention"] * (_GLM_LAYERS - 1)}, "config.layer_types"),
        ("glm-5.3", {"layer_types": ["weird_attention"] * _GLM_LAYERS}, "config.layer_types[0]"),
        ("glm-5.3", {"mlp_layer_types": ["dense"] * (_GLM_LAYERS + 1)}, "config.mlp_layer_types"),
        # a 0-based layer number past the 94 layers (0..93) would be a silent no-op (vLLM Qwen3MoeDecoderLayer)
        ("qwen3-235b-a22b", {"mlp_only_layers": [94]}, "config.mlp_only_layers[0]"),
        # DeepSeek-V4: 43 decoder layers + 1 MTP layer = 44 ratios (vLLM compress_ratios[layer_id])
        ("deepseek-v4-flash", {"compress_ratios": [0, 0] + [4, 128] * 20}, "config.compress_ratios"),
        ("deepseek-v4-flash", {"compress_ratios": [0, 0] + [4, 128] * 21 + [4]}, "config.compress_ratios"),
        ("deepseek-v4-flash", {"compress_ratios": [0, 0] + [4, 128] * 20 + [4, 7]}, "config.compress_ratios[43]"),
        # booleans as booleans
        ("kimi-linear-48b-a3b", {"mla_use_nope": "yes"}, "config.mla_use_nope"),
        ("glm-5.3", {"tie_word_embeddings": "no"}, "config.tie_word_embeddings"),
        # a regex compiled at read time, also where the weights are not counted from quantization_config (DSA)
        (
            "glm-5.3",
            {"quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:(unclosed"]}},
            "config.quantization_config.ignore[0]",
        ),
    ],
)
def test_refused_naming_the_key(tmp_path: Path, preset: str, edit: dict[str, Any], key: str) -> None:
    path = _write(tmp_path, preset, edit)
    with pytest.raises(ConfigError) as e:
        load_model(path)
    assert e.value.key == key and e.value.source == path and "\n" not in str(e.value)


def test_valid_edges_still_load(tmp_path: Path) -> None:
    """The values that are 0 by design stay accepted: NoPE (qk_rope_head_dim 0), no MTP layer, no shared expert."""
    m = load_model(_write(tmp_path, "glm-5.3", {"num_nextn_predict_layers": 0, "n_shared_experts": 0}))
    assert m.num_mtp_layers == 0
    # DeepSeek-V4 without its MTP layer: 43 ratios for 43 layers
    ratios = [0, 0] + [4, 128] * 20 + [4]
    assert load_model(_write(tmp_path, "deepseek-v4-flash", {"num_nextn_predict_layers": 0, "compress_ratios": ratios}))


runner = CliRunner()


@pytest.mark.parametrize(
    ("preset", "edit", "key"),
    [
        # every layer Gated DeltaNet: full_attention_interval 4 over 3 layers names no full layer
        ("qwen3-next-80b-a3b", {"num_hidden_layers": 3}, "config.full_attention_interval"),
        # every layer KDA
        (
            "kimi-linear-48b-a3b",
            {"linear_attn_config.full_attn_layers": [], "linear_attn_config.kda_layers": list(range(1, 28))},
            "config.linear_attn_config.full_attn_layers",
        ),
    ],
)
@pytest.mark.parametrize("deploy", ["glm-5.3-8xh200-vllm", "glm-5.3-8xh200-sglang"])
def test_no_attention_layer_is_exit_2_not_zero_division(
    tmp_path: Path, preset: str, edit: dict[str, Any], key: str, deploy: str
) -> None:
    """These divided by zero in vLLM's hybrid grouping (engines/vllm_hybrid.py _mamba: cdiv(n_attn, size) with no
    attention layer), exit 4 'internal error'; now refused where the config is read."""
    path = _write(tmp_path, preset, copy.deepcopy(edit))
    r = runner.invoke(app, ["budget", "--ctx", "8K", "--model", path, "--deploy", deploy])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and f"{path}" in r.stderr and key in r.stderr


@pytest.mark.parametrize("deploy", ["glm-5.3-8xh200-vllm", "glm-5.3-8xh200-sglang"])
def test_state_heads_not_dividing_tp_is_exit_2(tmp_path: Path, deploy: str) -> None:
    """Found by tests/fuzz/test_shipped_fields.py: Kimi-Linear's KDA num_heads 1 at TP8 was a ValueError on vLLM
    (exit 4). Both engines shard the state's heads over tp with divide(), which asserts at start-up (vLLM
    ``KimiLinearStateShape`` / SGLang ``Mamba2StateShape.create``): a refusal, exit 2."""
    path = _write(tmp_path, "kimi-linear-48b-a3b", {"linear_attn_config.num_heads": 1})
    r = runner.invoke(app, ["budget", "--ctx", "8K", "--model", path, "--deploy", deploy])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "heads 1 is not divisible by tensor parallel 8" in r.stderr


def test_sliding_layers_without_architectures(tmp_path: Path) -> None:
    """Found by tests/fuzz/test_hybrid_kinds.py on the landed main: gpt-oss's config.json without
    ``architectures`` planned its sliding layers as a hybrid model on SGLang with no hybrid pools (SGLang's
    ``is_hybrid_swa_model`` decides by model class, which the config no longer names). Refused, naming the key."""
    path = _write(tmp_path, "gpt-oss-120b", {"architectures": _DROP})
    with pytest.raises(ConfigError) as e:
        load_model(path)
    assert e.value.key == "config.architectures"
