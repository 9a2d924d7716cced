"""gpt-oss-120b on one H100 with vLLM at 128K (issue 23 item 4): the published threads say it does not start.

vllm-project/vllm#33155 (vLLM 0.14.1, Triton MoE backend, 'Model loading took 64.38 GiB') and #23278 (vLLM 0.10.1,
Marlin, 65.9651 GiB, 'Available KV cache memory: -2.14 GiB', "EngineCore failed to start") both ran the default
max_model_len 131,072 on one H100 and ran out of KV memory. Before kvplan sized the MXFP4 experts as the backend
holds them it planned 60.71 GiB of weights and ADMITTED the request.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})
ONE_H100 = ("-d", "glm-5.3-8xh200-vllm", "--set", "gpu=h100", "--set", "tp=1", "--set", "gpus_per_node=1",
            "--set", "kv_cache_dtype=auto", "--set", "context_length=131072")  # fmt: skip


@pytest.mark.parametrize("version", ["0.33.0", "0.14.1", "0.10.1"])
def test_gpt_oss_120b_one_h100_128k_does_not_start(version: str) -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "gpt-oss-120b", *ONE_H100,
                            "--set", f"engine_version={version}"])  # fmt: skip
    assert r.exit_code == 1, r.stdout[-800:]
    assert "the engine does not start" in r.stdout
    # the weights line: 69,077,887,616 B = 64.33 GiB (tests/models/test_weights_published.py derives it), the
    # Triton backend's layout on an SM90 GPU
    assert "64.33 GiB" in r.stdout
    assert "triton MoE backend" in r.stdout
