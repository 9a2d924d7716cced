"""Issue 23, "Words for every model": the output says what applies to the model in front of the user, in text and
JSON, and nothing else. A model without a DSA indexer (Llama: GQA; DeepSeek-V3 and Kimi-K2: plain MLA) gets no
indexer words, no DSA-only budgets (the indexer logits budget, SGLang's mqa_logits_static_budget_bytes and vLLM's
VLLM_SPARSE_INDEXER_MAX_LOGITS_MB, exist only in the indexer's code paths: SGLang nsa_indexer.py / vLLM
sparse-attention indexer) and no DeepSeek-V4 log cited as its CUDA-graph figure. A DSA model keeps them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})

COMMANDS = (
    ["admit", "--ctx", "64K"],
    ["budget"],
    ["workspace"],
    ["prefix", "--ctx", "64K", "--hit", "32K"],
    ["transfer", "--ctx", "64K"],
)
ENGINES = (["--set", "engine=sglang"], ["--set", "engine=vllm"])


def _run(args: list[str], codes: tuple[int, ...] = (0,)) -> str:
    r = runner.invoke(app, args)
    assert r.exit_code in codes, r.output
    return r.stdout


@pytest.mark.parametrize("engine", ENGINES, ids=("sglang", "vllm"))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_llama_run_never_speaks_of_an_indexer(command: list[str], engine: list[str]) -> None:
    args = [*command, "--model", "llama-3.1-70b", *engine]
    for out in (_run(args), _run([*args, "-f", "json"])):
        assert "indexer" not in out.lower()
        assert "DSA" not in out
        assert "DeepSeek-V4" not in out  # the CUDA-graph estimate is not a V4 measurement of Llama


@pytest.mark.parametrize("engine", ENGINES, ids=("sglang", "vllm"))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_dsa_run_keeps_its_indexer(command: list[str], engine: list[str]) -> None:
    # GLM-5.3 on its own preset: the indexer K is in every figure and named (the workspace text names its
    # logits and top-k buffers); a verdict either way (vLLM does not start GLM-5.3 at its 1M positions on H200)
    args = [*command, "--model", "glm-5.3", *engine]
    assert ("top-k" if command[0] == "workspace" else "indexer") in _run(args, (0, 1)).lower()
    assert "indexer" in _run([*args, "-f", "json"], (0, 1))


@pytest.mark.parametrize("model", ["deepseek-v3", "kimi-k2", "llama-3.1-70b"])
@pytest.mark.parametrize("engine", ENGINES, ids=("sglang", "vllm"))
def test_workspace_json_has_no_indexer_logits_budget_without_an_indexer(model: str, engine: list[str]) -> None:
    # before: prefill.logits_bytes 1,073,741,824 and a logits budget for plain MLA, a budget only DSA's indexer takes
    ws = json.loads(_run(["workspace", "--model", model, *engine, "-f", "json"]))["workspace"]
    assert "prefill" not in ws and "logits_budget_bytes" not in ws
    assert all("logits" not in item["name"] and "top-k" not in item["name"] for item in ws["items"])


@pytest.mark.parametrize("engine", ENGINES, ids=("sglang", "vllm"))
def test_workspace_json_keeps_the_indexer_logits_budget_for_dsa(engine: list[str]) -> None:
    ws = json.loads(_run(["workspace", "--model", "glm-5.3", *engine, "-f", "json"]))["workspace"]
    # vLLM: VLLM_SPARSE_INDEXER_MAX_LOGITS_MB = 512 (vllm-0.33.0 reference §6); SGLang: its static budget (> 0)
    assert ws["logits_budget_bytes"] == 512 * (1 << 20) if "engine=vllm" in engine else ws["logits_budget_bytes"] > 0
    assert ws["prefill"]["logits_bytes"] == ws["prefill"]["rows"] * ws["prefill"]["cols"] * 4  # fp32 logits


def test_models_list_names_indexer_layers_only_for_dsa() -> None:
    text = _run(["models", "list"])
    llama = next(line for line in text.splitlines() if line.startswith("llama-3.1-70b"))
    assert "0/80" not in llama
    models = {m["name"]: m for m in json.loads(_run(["models", "list", "-f", "json"]))["models"]}
    assert "full_indexer_layers" not in models["llama-3.1-70b"]
    assert "full_indexer_layers" not in models["deepseek-v3"]
    # GLM-5.3: 78 layers, an indexer on every one (index_topk_freq absent: kvplan/configs/models/glm-5.3.yaml)
    assert models["glm-5.3"]["full_indexer_layers"] > 0


def test_models_show_llama_has_no_indexer_rows() -> None:
    assert "indexer" not in _run(["models", "show", "llama-3.1-70b"]).lower()
    assert "indexer" not in _run(["models", "show", "llama-3.1-70b", "-f", "json"])
    assert "full indexer layers" in _run(["models", "show", "glm-5.3"])


def test_help_and_package_describe_every_family() -> None:
    text = _run(["--help"])
    assert "DSA models (GLM" not in text
    assert "SGLang and vLLM" in text
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'description = "Capacity planning for sparse-attention (DSA)' not in pyproject


def test_vllm_cuda_graph_estimate_is_said_assumed_for_every_model() -> None:
    plan: dict[str, Any] = json.loads(
        _run(["admit", "--ctx", "64K", "--model", "llama-3.1-70b", "--set", "engine=vllm", "-f", "json"])
    )["plan"]
    term = next(t for t in plan["chain"] if t["label"] == "CUDA-graph estimate")
    assert term["detail"].startswith("ASSUMED, one figure for every model")
    assert term["bytes"] == 1_618 * (1 << 20)  # DEFAULT_CUDAGRAPH_ESTIMATE, unchanged: only its words changed


@pytest.mark.parametrize(("model", "word"), [("llama-3.1-70b", "attention"), ("glm-5.3", "indexer")])
def test_prefix_plot_names_the_work_the_model_does(model: str, word: str, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:  # fmt: skip
    pytest.importorskip("matplotlib")
    import kvplan.render.plot as plot

    seen: list[Any] = []
    monkeypatch.setattr(plot, "save", lambda plt, fig, path, reads: seen.append(fig))
    _run(["prefix", "--ctx", "64K", "--hit", "32K", "--sweep", "4", "--plot", str(tmp_path / "p.png"),
          "--model", model])  # fmt: skip
    labels = [t.get_text() for t in seen[0].axes[0].get_legend().get_texts()]
    assert f"{word} compute really saved" in labels
