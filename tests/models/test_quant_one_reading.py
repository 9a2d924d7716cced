"""Issue 24 item 6: one reading of a checkpoint's quantization (kvplan.models.quant.resolve / checkpoint_dtype).

The real public config of nvidia/DeepSeek-V3.2-NVFP4 (tests/data/hf/deepseek-v3.2-nvfp4: config.json and the repo's
verbatim hf_quant_config.json) in the three forms a ModelOpt NVFP4 quantization reaches kvplan:

- nested, ``{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", ...}}`` (the verbatim file):
  vLLM ``ModelConfig._parse_quant_hf_config`` sets quant_method modelopt_fp4 (producer modelopt, nested algo);
- flat with ``quant_method: modelopt`` (ModelOpt's config.json form): NVFP4;
- flat with no quant_method (the file's inner mapping alone): vLLM derives no method ('' -> unquantized: the
  ``_parse_quant_hf_config`` rule reads only the nested algo), nor does SGLang
  (``_modelopt_override_quantization_method``: only quant_method modelopt_fp4 or --quantization modelopt). Before the
  fix kvplan read this form twice: ``load._checkpoint_dtype`` said nvfp4 (a text search for 'fp4'), the per-module
  reader bf16 with nothing said.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.quant import checkpoint_dtype

NVFP4 = Path(__file__).parents[1] / "data" / "hf" / "deepseek-v3.2-nvfp4"


def _config(quantization: dict[str, Any] | None) -> dict[str, Any]:
    cfg = json.loads((NVFP4 / "config.json").read_text())
    assert "quantization_config" not in cfg  # the published config.json keeps it in hf_quant_config.json
    return cfg if quantization is None else {**cfg, "quantization_config": quantization}


HF_QUANT = json.loads((NVFP4 / "hf_quant_config.json").read_text())
FLAT = dict(HF_QUANT["quantization"])  # quant_algo NVFP4, group_size 16, exclude_modules; no quant_method


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        (HF_QUANT, "nvfp4"),
        ({**FLAT, "quant_method": "modelopt"}, "nvfp4"),
        (FLAT, "bf16"),  # torch_dtype bfloat16: the engines load it unquantized
        (None, "bf16"),
    ],
    ids=["nested", "flat-modelopt", "flat-no-method", "none"],
)
def test_one_reading_of_the_three_forms(quantization: dict[str, Any] | None, expected: str) -> None:
    assert checkpoint_dtype(_config(quantization), "config.json") == expected


def _write(tmp_path: Path, quantization: dict[str, Any] | None) -> str:
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization)))
    return str(tmp_path / "config.json")


def test_a_flat_nvfp4_config_without_quant_method_is_planned_unquantized_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "flat").mkdir()
    (tmp_path / "bare").mkdir()
    flat = load_model(_write(tmp_path / "flat", FLAT))
    bare = load_model(_write(tmp_path / "bare", None))
    split = Split.of(tp=8)
    # the engines allocate the layers unquantized: the bf16 checkpoint's weights, never NVFP4's 52,426,273,184 B
    # (tests/models/test_modelopt_quant_file.py), and never silently
    assert flat.estimated_weights_per_gpu(split, engine="vllm") == bare.estimated_weights_per_gpu(split, engine="vllm")
    said = " ".join(flat.weights_assumptions)
    assert "quant_algo 'NVFP4' but no quant_method" in said and '"quant_method": "modelopt"' in said, said


def test_the_flat_form_with_quant_method_is_nvfp4(tmp_path: Path) -> None:
    # the same inner mapping with quant_method modelopt: the NVFP4 weights of the verbatim snapshot (52,426,273,184 B
    # at tp 8 on vLLM, derived in tests/models/test_weights_published.py) -- the nested and flat readings agree
    arch = load_model(_write(tmp_path, {**FLAT, "quant_method": "modelopt"}))
    nested = load_model(str(NVFP4))
    split = Split.of(tp=8)
    assert arch.estimated_weights_per_gpu(split, engine="vllm") == nested.estimated_weights_per_gpu(
        split, engine="vllm"
    )


HF = Path(__file__).parents[1] / "data" / "hf"


@pytest.mark.parametrize("folder", sorted(p.name for p in HF.iterdir() if (p / "config.json").is_file()))
def test_every_reader_takes_the_method_resolve_takes(folder: str) -> None:
    # the MXFP4 kernel choice (kvplan.models.activation) and gpt-oss's expert layout read quant_method through
    # quant.method_of, the same normalisation resolve uses (lower case, '_' = '-'): one reading for every real config
    from kvplan.models.activation import activation_dims
    from kvplan.models.quant import method_of, resolve

    cfg = json.loads((HF / folder / "config.json").read_text())
    if "quantization_config" not in cfg and (HF / folder / "hf_quant_config.json").is_file():
        cfg["quantization_config"] = json.loads((HF / folder / "hf_quant_config.json").read_text())
    q = resolve(cfg, folder)
    assert method_of(cfg) in ("", q.method)
    dims = activation_dims(cfg)
    if dims is not None and dims.expert_intermediate:
        assert dims.moe_monolithic == (q.method == "mxfp4")
