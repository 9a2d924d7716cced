"""The two issue-27 families kvplan does not plan (docs/families.md): their config.json is refused for its
architecture, in one line naming ``architectures``, on both engines.

No verbatim config.json of either was found, so these are not copies. Each is the wrapper's shape, which every
source agrees on: the architecture and ``model_type`` at the top, the decoder's fields (``num_hidden_layers`` among
them) only inside ``text_config``. Sources: transformers ``Mistral4Config`` (``model_type = "mistral4"``,
``@auto_docstring(checkpoint="mistralai/Mistral-Small-4-119B-2603")``) inside ``Mistral3ForConditionalGeneration``
(transformers' Mistral4 model doc loads that checkpoint with it); transformers ``Qwen4ExpConfig`` /
``Qwen4ExpTextConfig`` (``qwen4_exp`` / ``qwen4_exp_text``) and ``Qwen4ExpForConditionalGeneration``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

MISTRAL_SMALL_4 = {
    "architectures": ["Mistral3ForConditionalGeneration"],
    "model_type": "mistral3",
    # Mistral4Config's defaults for the checkpoint (configuration_mistral4.py): 36 layers, MLA 256 + 64
    "text_config": {"model_type": "mistral4", "num_hidden_layers": 36, "kv_lora_rank": 256, "qk_rope_head_dim": 64},
}
QWEN3_8_FLASH_NEXT = {
    "architectures": ["Qwen4ExpForConditionalGeneration"],
    "model_type": "qwen4_exp",
    # 48 layers, 12 of them full attention (anthony-chaudhary/fak#9122: "36 linear_attention + 12 full_attention")
    "text_config": {"model_type": "qwen4_exp_text", "num_hidden_layers": 48, "full_attention_interval": 4},
}


@pytest.mark.parametrize(
    ("config", "architecture"),
    [(MISTRAL_SMALL_4, "Mistral3ForConditionalGeneration"), (QWEN3_8_FLASH_NEXT, "Qwen4ExpForConditionalGeneration")],
)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_refused_for_the_architecture_not_for_a_missing_field(
    tmp_path: Path, config: dict[str, object], architecture: str, engine: str
) -> None:
    # before: "config.json:1: num_hidden_layers: missing (required)". The file is not broken: its decoder's fields
    # sit in text_config, which kvplan reads only for the wrappers it plans
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", str(path), "--set", f"engine={engine}"])
    assert r.exit_code == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), r.stderr
    assert f"architectures: {architecture} is not a model kvplan plans" in lines[0], lines[0]
    assert "num_hidden_layers" not in lines[0]
