"""The GPU catalog and a GPU given by hand (kvplan/models/gpus.py), pinned where the mutation check moves it.

A CUDA total no public figure gives is the NVML total less 512 MiB (inside the 325-870 MiB driver reserves measured
on H100, H200, B200, GB200 and A100: reference C.1); ROCm reports the VRAM total itself (AMD: no reserve).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import ConfigError, InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.gpus import close_gpus, find_gpu, gpu_key
from kvplan.units import GiB, MiB


@pytest.mark.parametrize(
    ("name", "key"),
    [("NVIDIA GeForce RTX 4090", "rtx-4090"), ("AMD Instinct MI300X", "mi300x"), ("H100_SXM", "h100-sxm"),
     ("NVIDIA", "nvidia"), ("h100 nvidia", "h100-nvidia"), ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3")],
)  # fmt: skip
def test_gpu_key_drops_leading_vendor_words_only(name: str, key: str) -> None:
    # a vendor word alone is the name itself; one after the model stays
    assert gpu_key(name) == key


def test_a_derived_cuda_total_is_nvml_less_512_mib() -> None:
    # H100 PCIe: nvml_total 85,520,809,984 B (79.65 GiB), no public torch figure -> 85,520,809,984 − 536,870,912
    gpu = find_gpu("h100-pcie")
    assert "cuda_total" in gpu.derived
    assert gpu.nvml_total_bytes - gpu.cuda_total_bytes == 512 * MiB == 536_870_912
    assert gpu.cuda_total_bytes == 84_983_939_072
    # MI325X: ROCm's total is the VRAM total
    amd = find_gpu("mi325x")
    assert "cuda_total" in amd.derived and amd.cuda_total_bytes == amd.nvml_total_bytes == 274_877_906_944


def _gpu(tmp_path: Path, mapping: str) -> object:
    path = tmp_path / "d.yaml"
    path.write_text(f"model: llama-3.1-8b\nengine: vllm\ngpus_per_node: 1\ngpu:\n{mapping}")
    return load_deployment(str(path), []).gpu


def test_a_gpu_mapping_reads_its_fields(tmp_path: Path) -> None:
    g = _gpu(tmp_path, "  name: my gpu\n  nvml_total: 96GiB\n  sm: 1000\n  hbm_bandwidth_per_s: 1152921504606846976B\n"
                       "  aliases: [mine, 7]\n  derived: [nvml_total]\n")  # fmt: skip
    assert g.sm == 1000 and g.hbm_bandwidth_bytes_per_s == 1 << 60  # the bounds are inclusive
    assert g.aliases == ("mine", "7") and g.derived == ("nvml_total", "cuda_total")
    assert g.cuda_total_bytes == 96 * GiB - 512 * MiB


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("  sm: 1001\n", "sm"),
        ("  hbm_bandwidth_per_s: 1152921504606846977B\n", "hbm_bandwidth_per_s"),
        ("  aliases: mine\n", "aliases: expected a list of names"),
        ("  cuda_total: 97GiB\n", r"cuda_total: 104,152,956,928 B is above nvml_total \(103,079,215,104 B\)"),
        ("  sm: 90\n  gfx: gfx942\n", "gfx: 'gfx942' beside sm 90"),
    ],
)
def test_a_gpu_mapping_past_its_bounds_is_refused(tmp_path: Path, extra: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        _gpu(tmp_path, f"  name: my gpu\n  nvml_total: 96GiB\n{extra}")


def test_cuda_total_equal_to_nvml_is_accepted_and_amd_has_no_reserve(tmp_path: Path) -> None:
    assert _gpu(tmp_path, "  name: g\n  nvml_total: 96GiB\n  cuda_total: 96GiB\n").cuda_total_bytes == 96 * GiB
    amd = _gpu(tmp_path, "  name: g\n  vendor: amd\n  nvml_total: 96GiB\n")
    assert amd.cuda_total_bytes == 96 * GiB and amd.total_label == "GPU total (amd-smi)"


def test_a_custom_gpu_says_its_memory_and_default_sm() -> None:
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpus_per_node=1", "gpu=custom",
                                 "gpu_memory=96GiB", "tp=1"])  # fmt: skip
    g = dep.gpu
    assert g.sm == 90 and g.nvml_total_bytes == 96 * GiB == 103_079_215_104
    assert g.source == ("gpu=custom: gpu_memory 103,079,215,104 B (96.00 GiB) as the NVML total, SM 90"
                        " (kvplan's default: Hopper)")  # fmt: skip
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpus_per_node=1", "gpu=custom",
                                 "gpu_memory=100000000000B", "gpu_sm=100", "tp=1"])  # fmt: skip
    assert dep.gpu.source == "gpu=custom: gpu_memory 100,000,000,000 B (93.13 GiB) as the NVML total, SM 100"


def test_an_unknown_gpu_names_the_three_closest() -> None:
    assert len(close_gpus("h10")) == 3 and len(close_gpus("h10", n=5)) == 5
    # difflib's 4 × n candidates: h100x's first spellings are all H100 SXM's, the next ones name other GPUs
    assert close_gpus("h100x") == ["h100-sxm", "h800", "h200"]
    # a cut "RTX PRO 6000 Ser(ver)": its first 9 spellings name two GPUs, the first 12 three
    assert close_gpus("RTX PRO 6000 Ser") == ["rtx-pro-6000", "rtx-6000-ada", "rtx-5090"]
    with pytest.raises(InputError, match=r"unknown GPU 'h10' \(closest: h100-sxm, h20, h100-nvl\)"):
        find_gpu("h10")
    # a word of the name that is a catalog spelling is found even where difflib's ratio is low
    assert "h200" in close_gpus("my-h200-box")


@pytest.mark.parametrize("zeros", ["", "  sm: 0\n  hbm_bandwidth_per_s: 0B\n"])
def test_an_amd_gpu_has_a_gfx_target_and_sm_0(tmp_path: Path, zeros: str) -> None:
    # an AMD GPU names its ISA (gfx942: MI300X) and no CUDA compute capability: sm 0, given or left out; a bandwidth
    # not given is 0 (unknown), and 0 may be given
    g = _gpu(tmp_path, f"  name: g\n  vendor: amd\n  nvml_total: 192GiB\n  gfx: gfx942\n{zeros}")
    assert (g.sm, g.gfx, g.vendor, g.hbm_bandwidth_bytes_per_s) == (0, "gfx942", "amd", 0)


def test_a_gpu_word_inside_a_long_host_name_is_still_suggested() -> None:
    # "our-inference-cluster-node-h200": difflib's ratio to "h200" is 2 × 4 / (31 + 4) = 0.23, under its 0.5
    # cutoff, so difflib names nothing; the word "h200" is a catalog spelling on its own, and that alone names it
    assert close_gpus("our-inference-cluster-node-h200") == ["h200"]
