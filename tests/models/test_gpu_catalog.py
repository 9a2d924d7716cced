"""The GPU catalog (configs/gpus.yaml, issue 12 item 4): every entry sourced, names and aliases resolve in any
case, unknown names get the closest ones, derived figures follow the one rule, AMD totals are worded for amd-smi."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import ConfigError, InputError
from kvplan.models import gpus
from kvplan.models.gpus import find_gpu, gpu_catalog
from kvplan.probes.nvml import match_catalog, read_gpus
from kvplan.units import GiB, MiB
from tests.probes.fake_nvml import FakeGpu, FakeNvml

CATALOG = gpu_catalog()

# Every GPU issue 12 names (H800 ... MI355X) and those a team buys today: the catalog must hold each.
REQUIRED = (
    "h200", "h200-nvl", "h100-sxm", "h100-pcie", "h100-nvl", "h800", "h20", "h20-3e", "b200", "b300", "gb200",
    "gb300", "gh200-96gb", "gh200-144gb", "gb10", "a100-80gb", "a100-80gb-pcie", "a100-40gb", "a800-80gb", "l4",
    "l40", "l40s", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-6000-ada", "rtx-pro-6000", "mi300x", "mi308x", "mi325x",
    "mi355x", "mi250x",
)  # fmt: skip


def test_catalog_holds_every_required_gpu() -> None:
    assert set(REQUIRED) <= set(CATALOG), sorted(set(REQUIRED) - set(CATALOG))


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_every_entry_cites_its_source(key: str) -> None:
    g = CATALOG[key]
    assert len(g.source) > 40, f"{key}: no source"
    if "nvml_total" in g.derived:
        # a capacity from the datasheet says so, and says no measured figure was seen
        assert "datasheet" in g.source and ("not seen" in g.source or "[N/A]" in g.source), key
    elif g.vendor == "amd":
        # amd-smi / rocm-smi print the VRAM total in bytes: the source quotes that very figure
        assert str(g.nvml_total_bytes) in g.source, key
    else:
        # nvidia-smi prints memory.total in MiB: the source quotes that very figure (143771 for 143,771 MiB)
        assert g.nvml_total_bytes % MiB == 0, key
        assert str(g.nvml_total_bytes // MiB) in g.source, key
    if "cuda_total" not in g.derived and g.vendor == "nvidia":
        assert "CUDA" in g.source or "torch" in g.source, key


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_derived_cuda_total_follows_the_one_rule(key: str) -> None:
    g = CATALOG[key]
    if "cuda_total" in g.derived and g.vendor == "nvidia":
        # NVML total less kvplan's assumed driver reserve, 512 MiB
        assert g.cuda_total_bytes == g.nvml_total_bytes - 512 * MiB
    elif "cuda_total" in g.derived:
        assert g.cuda_total_bytes == g.nvml_total_bytes  # ROCm: hipMemGetInfo reports the VRAM total
    assert g.cuda_total_bytes <= g.nvml_total_bytes
    assert g.hbm_bandwidth_bytes_per_s > 0, key


def test_h20_figures() -> None:
    g = find_gpu("NVIDIA H20")
    # nvidia-smi "NVIDIA H20, 97871 MiB": 97,871 × 1,048,576 = 102,625,181,696 B
    assert g.nvml_total_bytes == 102_625_181_696
    # no public torch total: 97,871 − 512 = 97,359 MiB = 102,088,310,784 B, marked derived
    assert g.cuda_total_bytes == 102_088_310_784 and g.derived == ("cuda_total",)


def test_measured_cuda_totals_from_oom_messages() -> None:
    l40s, rtx4090 = find_gpu("L40S"), find_gpu("RTX 4090")
    # "GPU 0 has a total capacity of 44.39 GiB" on L40S hosts: 44.39 × 1,024 = 45,455.36 -> 45,455 MiB,
    # a driver reserve of 46,068 − 45,455 = 613 MiB
    assert l40s.cuda_total_bytes == 45_455 * MiB and l40s.nvml_total_bytes - l40s.cuda_total_bytes == 613 * MiB
    # 23.64 GiB on a 24,564 MiB RTX 4090: 23.64 × 1,024 = 24,207.36 -> 24,207 MiB, reserve 357 MiB
    assert rtx4090.cuda_total_bytes == 24_207 * MiB and rtx4090.nvml_total_bytes - rtx4090.cuda_total_bytes == 357 * MiB
    assert "cuda_total" not in l40s.derived + rtx4090.derived


@pytest.mark.parametrize(
    ("key", "sm"),
    [
        ("h800", 90), ("h20", 90), ("h20-3e", 90), ("gh200-96gb", 90), ("gh200-144gb", 90), ("b300", 103),
        ("gb300", 103), ("gb10", 121), ("l4", 89), ("l40s", 89), ("l40", 89), ("rtx-4090", 89),
        ("rtx-6000-ada", 89), ("rtx-3090", 86), ("rtx-5090", 120), ("rtx-pro-6000", 120), ("a800-80gb", 80),
        ("a100-40gb", 80), ("a100-80gb-pcie", 80),
    ],
)  # fmt: skip
def test_compute_capability(key: str, sm: int) -> None:
    assert (CATALOG[key].sm, CATALOG[key].vendor, CATALOG[key].gfx) == (sm, "nvidia", "")


@pytest.mark.parametrize(
    ("key", "gfx"), [("mi300x", "gfx942"), ("mi308x", "gfx942"), ("mi325x", "gfx942"), ("mi355x", "gfx950")]
)
def test_amd_gfx_and_label(key: str, gfx: str) -> None:
    g = CATALOG[key]
    assert (g.sm, g.vendor, g.gfx) == (0, "amd", gfx)
    assert g.total_label == "GPU total (amd-smi)"


def test_nvidia_label() -> None:
    assert find_gpu("h200").total_label == "GPU total (NVML)"


def test_mi355x_is_288_gib_derived() -> None:
    # datasheet 288 GB read as GiB (MI300X's 192 GB shows as 191.69-192.00 GiB): 288 × 2^30 = 309,237,645,312 B
    g = find_gpu("MI355X")
    assert g.nvml_total_bytes == 309_237_645_312 == 288 * GiB
    assert g.derived == ("nvml_total", "cuda_total")


@pytest.mark.parametrize(
    ("spelling", "key"),
    [
        ("H100", "h100-sxm"), ("MI300", "mi300x"), ("mi300x", "mi300x"), ("GB300", "gb300"), ("RTX 4090", "rtx-4090"),
        ("4090", "rtx-4090"), ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("L40S", "l40s"), ("l40", "l40"),
        ("NVIDIA H20", "h20"), ("nvidia_h20-3e", "h20-3e"), ("NVIDIA GH200 120GB", "gh200-96gb"),
        ("GH200", "gh200-96gb"), ("AMD Instinct MI355X", "mi355x"), ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("h200 nvl", "h200-nvl"), ("NVIDIA H200", "h200"), ("NVIDIA B300 SXM6 AC", "b300"), ("B300", "b300"),
        ("dgx spark", "gb10"), ("A800", "a800-80gb"), ("RTX PRO 6000", "rtx-pro-6000"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"), ("H800", "h800"),
    ],
)  # fmt: skip
def test_spellings_resolve(spelling: str, key: str) -> None:
    assert find_gpu(spelling).key == key


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_every_name_and_alias_names_its_own_gpu(key: str) -> None:
    g = CATALOG[key]
    for spelling in (key, g.name, g.name.upper(), *g.aliases):
        assert find_gpu(spelling).key == key, spelling


def test_unknown_gpu_lists_the_closest_and_the_custom_hint() -> None:
    with pytest.raises(InputError) as e:
        find_gpu("H2O")
    message = str(e.value)
    assert "closest: h20" in message
    assert "--set gpu=custom --set gpu_memory=" in message


def test_unknown_gpu_far_from_everything_points_to_the_listing() -> None:
    with pytest.raises(InputError, match=r"are listed by `kvplan gpus`"):
        find_gpu("tpu-v5e")


def test_a_spelling_that_names_two_gpus_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(gpus.__file__).parent.parent / "configs" / "gpus.yaml").read_text(encoding="utf-8")
    # the L40's entry claims the L40S's name as an alias: one spelling, two GPUs
    text = text.replace("    name: NVIDIA L40\n", "    name: NVIDIA L40\n    aliases: [l40s]\n", 1)
    (tmp_path / "gpus.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(gpus, "configs_root", lambda: tmp_path)
    with pytest.raises(ConfigError, match="already names"):
        gpus._gpu_table.__wrapped__()


def test_vendor_words_dropped_only_in_front() -> None:
    assert gpus.gpu_key("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert gpus.gpu_key("AMD Instinct MI300X") == "mi300x"
    assert gpus.gpu_key(" h200_NVL ") == "h200-nvl"
    assert gpus.gpu_key("NVIDIA") == "nvidia"  # one word stays


@pytest.mark.parametrize(("name", "key"), [("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200-nvl"),
                                           ("NVIDIA GH200 120GB", "gh200-96gb"), ("NVIDIA L40S", "l40s")])  # fmt: skip
def test_probe_matches_the_exact_name_first(name: str, key: str) -> None:
    # regression: the substring match took "NVIDIA H200" for the longer "NVIDIA H200 NVL", and found no GPU
    # for "NVIDIA GH200 120GB" (an alias, not a substring of the catalog name)
    (r,) = read_gpus(FakeNvml([FakeGpu(name=name)]))
    assert getattr(match_catalog(r), "key", None) == key
