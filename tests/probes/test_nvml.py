"""`kvplan probe` against a fake NVML: v2 and v1 memory, zero devices, errors mid-query, --emit-deploy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import ProbeUnavailable
from kvplan.probes import nvml as probe_nvml
from kvplan.probes.nvml import match_catalog, read_gpus
from tests.probes.fake_nvml import FakeGpu, FakeNvml

MiB = 1 << 20
runner = CliRunner(env={"KVPLAN_FORMAT": None})


def test_v2_memory() -> None:
    nv = FakeNvml([FakeGpu(used=2048 * MiB, processes=[(4242, 2048 * MiB)])])
    (r,) = read_gpus(nv)
    assert r.memory_api == "v2"
    assert (r.total_bytes, r.reserved_bytes, r.used_bytes) == (143_771 * MiB, 615 * MiB, 2048 * MiB)
    # free = 143,771 − 615 − 2,048 = 141,108 MiB
    assert r.free_bytes == 141_108 * MiB
    # usable = NVML total − reserved = 143,156 MiB, the catalog's CUDA total for the H200
    assert r.usable_bytes == 143_156 * MiB
    assert (r.driver, r.cuda_version, r.sm) == ("580.159.03", "13.0", 90)
    assert r.processes[0].pid == 4242
    assert nv.shutdowns == 1


def test_v1_fallback() -> None:
    # v1: used = reserved + allocated; no reserved field
    (r,) = read_gpus(FakeNvml([FakeGpu(used=10 * MiB)], v2=False))
    assert r.memory_api.startswith("v1")
    assert r.reserved_bytes is None
    assert r.used_bytes == (615 + 10) * MiB


def test_zero_devices() -> None:
    with pytest.raises(ProbeUnavailable, match="no GPU"):
        read_gpus(FakeNvml([]))


def test_no_driver() -> None:
    with pytest.raises(ProbeUnavailable, match="Driver Not Loaded"):
        read_gpus(FakeNvml([FakeGpu()], init_error="Driver Not Loaded"))


def test_error_mid_query_is_one_sentence_and_shuts_down() -> None:
    nv = FakeNvml([FakeGpu(), FakeGpu(fail_on="name")])
    with pytest.raises(ProbeUnavailable, match="GPU is lost"):
        read_gpus(nv)
    assert nv.shutdowns == 1


def test_catalog_match() -> None:
    (r,) = read_gpus(FakeNvml([FakeGpu()]))
    assert getattr(match_catalog(r), "key", None) == "h200"
    (b,) = read_gpus(FakeNvml([FakeGpu(name="NVIDIA B200", total=183_359 * MiB, cc=(10, 0))]))
    assert getattr(match_catalog(b), "key", None) == "b200"
    (x,) = read_gpus(FakeNvml([FakeGpu(name="Some Other GPU")]))
    assert match_catalog(x) is None


def test_cli_without_nvml_is_exit_3() -> None:
    def missing() -> None:
        raise ProbeUnavailable("NVML bindings are not installed: pip install 'kvplan[probe]'")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(probe_nvml, "load_nvml", missing)
        r = runner.invoke(app, ["probe"])
    assert r.exit_code == 3
    assert r.stderr.startswith("kvplan: error: NVML bindings are not installed") and "Traceback" not in r.stderr


def test_emit_deploy_plans_against_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a busy GPU: 20 GiB already used by another process
    nv = FakeNvml([FakeGpu(used=20 * 1024 * MiB, processes=[(7, 20 * 1024 * MiB)])])
    monkeypatch.setattr(probe_nvml, "load_nvml", lambda: nv)
    out = tmp_path / "here.yaml"
    r = runner.invoke(app, ["probe", "--emit-deploy", str(out), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["gpus"][0]["catalog"] == "h200"
    text = out.read_text()
    # free = 143,771 − 615 − 20,480 = 122,676 MiB; pre-load free = that − 1 GiB = 121,652 MiB
    assert f"pre_load_free: {121_652 * MiB}B" in text
    assert f"cuda_total: {143_156 * MiB}B" in text
    a = runner.invoke(app, ["admit", "--ctx", "128K", "--deploy", str(out), "--format", "json"])
    # with 20 GiB taken by another process the pool still holds 128K (214,912 tokens), but the slack,
    # 121,652 MiB × (1 − 0.886) = 13.54 GiB, no longer holds req_to_token 8.00 + graphs 2.50 + logits 3.19 GiB
    assert a.exit_code == 1, a.stderr
    d = json.loads(a.stdout)
    assert d["binding"] == "workspace"
    plan = d["plan"]
    assert plan["knobs"][[k["name"] for k in plan["knobs"]].index("pre_load_free")]["value"] == 121_652 * MiB
