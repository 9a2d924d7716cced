"""A ModelOpt snapshot keeps its quantization in hf_quant_config.json beside config.json (kvplan.models.from_hf).

Before, kvplan read config.json alone and planned nvidia/DeepSeek-V3.2-NVFP4 as bf16: 160 GiB a GPU at tp 8
instead of the 48.83 GiB the published-weights test derives (tests/models/test_weights_published.py,
test_nvfp4_prediction_exact: 52,426,273,184 B against vLLM 0.18.0's 'Model loading took 48.62 GiB').
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model

NVFP4 = Path(__file__).parents[1] / "data" / "hf" / "deepseek-v3.2-nvfp4"
runner = CliRunner(env={"KVPLAN_FORMAT": None})


def test_the_snapshot_folder_reads_its_hf_quant_config() -> None:
    arch = load_model(str(NVFP4))
    # the checkpoint laid out per tensor in NVFP4 + vLLM's load-time additions, derived term by term in
    # test_weights_published.test_nvfp4_prediction_exact
    assert arch.estimated_weights_per_gpu(Split.of(tp=8), engine="vllm") == 52_426_273_184


def test_without_the_file_it_is_the_checkpoint_dtype(tmp_path: Path) -> None:
    # the same config.json alone: bf16 (torch_dtype), about 3.3 × the NVFP4 figure: what kvplan printed before
    shutil.copy(NVFP4 / "config.json", tmp_path / "config.json")
    bare = load_model(str(tmp_path)).estimated_weights_per_gpu(Split.of(tp=8), engine="vllm")
    assert bare > 3 * 52_426_273_184


def test_config_json_quantization_wins(tmp_path: Path) -> None:
    # a config.json that names its own quantization keeps it; the file beside it is not read (it is not even JSON).
    # fp8 in 128×128 blocks: 1 B a weight + 4 B a block, about half of bf16 and above NVFP4's 0.5625 B a weight
    config = json.loads((NVFP4 / "config.json").read_text())
    shutil.copy(NVFP4 / "config.json", tmp_path / "config.json")
    bare = load_model(str(tmp_path)).estimated_weights_per_gpu(Split.of(tp=8), engine="vllm")
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "hf_quant_config.json").write_text("not json at all")
    fp8 = load_model(str(tmp_path)).estimated_weights_per_gpu(Split.of(tp=8), engine="vllm")
    assert 52_426_273_184 < fp8 < bare * 6 // 10


def test_a_bad_hf_quant_config_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    shutil.copy(NVFP4 / "config.json", tmp_path / "config.json")
    (tmp_path / "hf_quant_config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"hf_quant_config\.json"):
        load_model(str(tmp_path))
    r = runner.invoke(app, ["budget", "--model", str(tmp_path)])
    assert r.exit_code == 2
    assert "hf_quant_config.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
