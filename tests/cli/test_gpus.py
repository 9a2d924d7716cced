"""`kvplan gpus`, `--set gpu=custom`, GPU names on the command line, and multi-node GPU counts (issue 12 items 4, 5).

Bad input is exit 2 with ONE line on stderr naming the key; nothing on stdout (but the JSON error document).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.models.gpus import gpu_catalog
from kvplan.units import GiB, MiB

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def one_error(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def plan(*sets: str) -> dict[str, Any]:
    result = invoke("admit", "--ctx", "128K", *(a for s in sets for a in ("--set", s)), "-f", "json")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)["plan"]  # type: ignore[no-any-return]


def chain(p: dict[str, Any]) -> dict[str, int]:
    return {t["label"]: t["bytes"] for t in p["chain"]}


# --------------------------------------------------------------------------- kvplan gpus


def test_gpus_json_lists_every_catalog_gpu_with_raw_integers() -> None:
    result = invoke("gpus", "-f", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["command"] == "gpus" and doc["schema_version"] == 1
    rows = {g["key"]: g for g in doc["gpus"]}
    assert list(rows) == list(gpu_catalog())
    h20 = rows["h20"]
    # 97,871 MiB as nvidia-smi prints it; CUDA total derived: (97,871 − 512) MiB
    assert (h20["nvml_total_bytes"], h20["cuda_total_bytes"]) == (97_871 * MiB, 97_359 * MiB)
    assert h20["derived"] == ["cuda_total"] and h20["sm"] == 90 and h20["gfx"] is None
    assert rows["mi355x"]["gfx"] == "gfx950" and rows["mi355x"]["total_label"] == "GPU total (amd-smi)"
    assert doc["derived_cuda_reserve_bytes"] == 512 * MiB
    assert all(g["source"] for g in doc["gpus"])


def test_gpus_table_shows_mib_and_gib_and_the_custom_hint() -> None:
    result = invoke("gpus")
    assert result.exit_code == 0, result.stderr
    # H200: 143,771 MiB = 143,771 / 1,024 = 140.40 GiB
    assert "143,771 MiB (140.40 GiB)" in result.stdout
    assert "--set gpu=custom --set gpu_memory=96GiB" in result.stdout
    assert "gfx942" in result.stdout and "SM 103" in result.stdout


def test_gpus_markdown() -> None:
    result = invoke("gpus", "-f", "markdown")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("## GPU catalog:")
    assert "| l40s | NVIDIA L40S | - | 46,068 MiB (44.99 GiB) |" in result.stdout  # 46,068 / 1,024 = 44.99


# --------------------------------------------------------------------------- names on the command line


@pytest.mark.parametrize(("spelling", "name"), [("H200 NVL", "NVIDIA H200 NVL"), ("mi300", "AMD Instinct MI300X"),
                                                ("b300", "NVIDIA B300 SXM6 AC")])  # fmt: skip
def test_set_gpu_by_alias(spelling: str, name: str) -> None:
    details = {t["label"]: t["detail"] for t in plan(f"gpu={spelling}")["chain"]}
    label = "GPU total (amd-smi)" if name.startswith("AMD") else "GPU total (NVML)"
    assert details[label].startswith(name)


def test_set_gpu_as_a_bare_number_is_a_name() -> None:
    # regression: --set gpu=4090 reached the loader as the integer 4090 ("expected a non-empty string")
    message = one_error(invoke("admit", "--ctx", "128K", "--set", "gpu=4090"))
    assert "expected" not in message
    assert "NVIDIA GeForce RTX 4090" in message  # resolved; the DSA engine then refuses SM89 with its reason


def test_amd_total_is_worded_for_amd_smi() -> None:
    terms = chain(plan("gpu=mi355x"))
    # 288 GiB = 309,237,645,312 B, under the amd-smi label, never NVML's
    assert terms["GPU total (amd-smi)"] == 309_237_645_312
    assert "GPU total (NVML)" not in terms


def test_unknown_gpu_exit_2_with_closest_names() -> None:
    message = one_error(invoke("admit", "--ctx", "128K", "--set", "gpu=H2O"))
    assert "--set: gpu: unknown GPU 'H2O'" in message
    assert "closest: h20, h200" in message
    assert "--set gpu=custom --set gpu_memory=" in message


# --------------------------------------------------------------------------- --set gpu=custom


def test_custom_gpu_plans_end_to_end() -> None:
    p = plan("gpu=custom", "gpu_memory=96GiB")
    terms = chain(p)
    # gpu_memory is the NVML total: 96 × 2^30 = 103,079,215,104 B; CUDA total 96 GiB − 512 MiB = 102,542,344,192 B
    assert terms["GPU total (NVML)"] == 96 * GiB == 103_079_215_104
    assert terms["CUDA-visible total"] == 96 * GiB - 512 * MiB == 102_542_344_192
    assert p["gpu"] == "custom"


def test_custom_gpu_with_sm_and_room_admits() -> None:
    result = invoke("admit", "--ctx", "128K", "--set", "gpu=custom", "--set", "gpu_memory=192GiB", "--set",
                    "gpu_sm=100", "-f", "json")  # fmt: skip
    assert result.exit_code == 0, result.stdout
    assert chain(json.loads(result.stdout)["plan"])["GPU total (NVML)"] == 192 * GiB


def test_custom_gpu_needs_its_memory() -> None:
    message = one_error(invoke("admit", "--ctx", "128K", "--set", "gpu=custom"))
    assert "gpu: gpu=custom needs gpu_memory=" in message


def test_gpu_memory_without_custom_is_refused() -> None:
    message = one_error(invoke("admit", "--ctx", "128K", "--set", "gpu_memory=96GiB"))
    assert "gpu_memory describes a custom GPU: add gpu=custom" in message


def test_custom_gpu_memory_needs_a_unit_and_a_gib() -> None:
    assert "no unit" in one_error(invoke("admit", "--ctx", "1K", "--set", "gpu=custom", "--set", "gpu_memory=96"))
    assert "at least 1024 MiB" in one_error(
        invoke("admit", "--ctx", "1K", "--set", "gpu=custom", "--set", "gpu_memory=512MiB")
    )


def test_custom_gpu_in_a_deployment_file(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("model: glm-5.3\ngpu: custom\ngpu_memory: 192GiB\ngpu_sm: 100\n", encoding="utf-8")
    result = invoke("budget", "-d", path, "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert chain(json.loads(result.stdout)["plan"])["GPU total (NVML)"] == 192 * GiB
    path.write_text("model: glm-5.3\ngpu: custom\n", encoding="utf-8")
    message = one_error(invoke("budget", "-d", path))
    assert "d.yaml:2: gpu: gpu=custom needs gpu_memory=" in message  # file, line, key


# --------------------------------------------------------------------------- multi-node


@pytest.mark.parametrize(
    ("sets", "hint"),
    [
        (("tp=16",), "tp 16 × pp 1 needs 16 GPUs, and 1 node(s) × 8 GPUs hold 8: add nodes=2"),
        (("ep=16",), "ep 16 × pp 1 needs 16 GPUs, and 1 node(s) × 8 GPUs hold 8: add nodes=2"),
        (("tp=8", "pp=2"), "tp 8 × pp 2 needs 16 GPUs, and 1 node(s) × 8 GPUs hold 8: add nodes=2"),
        # 32 ranks on 8-GPU nodes: ceil(32 / 8) = 4 nodes
        (("tp=32", "nodes=2"), "needs 32 GPUs, and 2 node(s) × 8 GPUs hold 16: add nodes=4"),
        # 16 ranks on 4-GPU nodes: ceil(16 / 4) = 4 nodes
        (("tp=16", "gpus_per_node=4"), "needs 16 GPUs, and 1 node(s) × 4 GPUs hold 4: add nodes=4"),
    ],
)
def test_more_ranks_than_gpus_names_the_nodes_to_add(sets: tuple[str, ...], hint: str) -> None:
    message = one_error(invoke("admit", "--ctx", "128K", *(a for s in sets for a in ("--set", s))))
    assert hint in message


def test_tp16_on_two_nodes_plans() -> None:
    p = plan("tp=16", "nodes=2")
    assert p["attn_tp"] == 16
