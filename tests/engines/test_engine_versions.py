"""Engine versions as data (kvplan/versions.py) and CUDA graphs off on both engines (issue 12 item 3).

Every expected figure is derived in a comment from the engines' rules (shared/reference/*.md, docs/engines.md) and
the catalog: H200 NVML 143,771 MiB; H100 80GB NVML 81,559 MiB, CUDA 81,105 MiB (kvplan/configs/gpus.yaml).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm import DEFAULT_CUDAGRAPH_ESTIMATE, DEFAULT_NON_KV_OTHER
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, MiB
from kvplan.versions import SGLANG, VLLM, parse_version, rules_for, sglang_rules, vllm_rules
from tests.conftest import make_plan
from tests.engines.test_vllm_profile import LLAMA_TP4_PROFILE

LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
runner = CliRunner(env={"KVPLAN_FORMAT": None})
GQA_DEFAULTS = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
"""The GLM-5.3 preset pins an fp8 MLA cache and 64-token pages: a Llama gets the engines' own defaults."""


def _llama(*sets: str) -> PoolPlan:
    dep = load_deployment(None, [f"model={LLAMA}", "gpu=h100", *GQA_DEFAULTS, *sets])
    return plan_pool(load_model(dep.model), dep)


# --------------------------------------------------------------------------- the version strings


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.5.23", (0, 5, 23)),
        ("0.5.9", (0, 5, 9)),
        ("0.4.6.post1", (0, 4, 6)),  # a post-release takes its release's rules
        ("v0.11.0", (0, 11, 0)),  # the git tag spelling
        ("0.33.0rc1", (0, 33, 0)),  # a release candidate takes its release's rules
        ("0.9", (0, 9, 0)),  # padded to three numbers
        ("0.8.5.dev665+gd4154c35a", (0, 8, 5)),  # a dev build with a local label (vllm-project/vllm#18520)
    ],
)
def test_parse_version(text: str, release: tuple[int, ...]) -> None:
    assert parse_version(text) == release


@pytest.mark.parametrize("text", ["latest", "", "0.5.x", "1..2", "0.5.23 --tp 8", "9" * 70])
def test_parse_version_refuses_what_is_not_a_version(text: str) -> None:
    with pytest.raises(InputError, match="is not a version"):
        parse_version(text)


@pytest.mark.parametrize(
    ("engine", "version", "label"),
    [
        ("sglang", "0.5.23", "0.5.10-0.5.23"),
        ("sglang", "0.5.10", "0.5.10-0.5.23"),
        ("sglang", "0.5.9", "0.5.8.post1-0.5.9"),
        ("sglang", "0.5.9.post1", "0.5.8.post1-0.5.9"),
        # PEP 440: a post-release sorts after its release; the 0.5.8.post1 line carries 0.5.9's GLM-5 DSA pool
        ("sglang", "0.5.8.post1", "0.5.8.post1-0.5.9"),
        ("sglang", "0.5.8", "0.5.7-0.5.8"),
        ("sglang", "0.5.9rc0", "0.5.8.post1-0.5.9"),
        ("sglang", "0.4.1", "0.4.0-0.4.5"),
        ("sglang", "0.4.6.post1", "0.4.6"),
        ("sglang", "0.4.10", "0.4.8-0.5.2"),
        ("vllm", "0.33.0", "0.21-0.33 (V1, CUDA-graph estimate in the budget)"),
        ("vllm", "0.33.0rc1", "0.21-0.33 (V1, CUDA-graph estimate in the budget)"),
        ("vllm", "0.21.0", "0.21-0.33 (V1, CUDA-graph estimate in the budget)"),
        ("vllm", "0.20.2", "0.9-0.20 (V1, CUDA graphs outside the budget)"),
        ("vllm", "v0.11.0", "0.9-0.20 (V1, CUDA graphs outside the budget)"),
        ("vllm", "0.9.0", "0.9-0.20 (V1, CUDA graphs outside the budget)"),
    ],
)
def test_each_version_takes_the_row_in_force(engine: str, version: str, label: str) -> None:
    assert rules_for(engine, version).label == label


@pytest.mark.parametrize(
    ("engine", "version", "words"),
    [
        ("sglang", "0.3.6.post3", "outside every range"),  # 0.4.0-0.5.23 are all modelled (test_engine_versions_sglang)
        ("sglang", "0.3.6", "outside every range"),
        ("sglang", "0.5.24", "outside every range"),  # a future release is not silently 0.5.23
        ("vllm", "0.5.4", "outside every range"),  # V0 0.6-0.8 is modelled (tests/engines/test_vllm_v0.py)
        ("vllm", "0.5.99", "outside every range"),
        ("vllm", "0.34.0", "outside every range"),
    ],
)
def test_unmodelled_versions_are_an_error_naming_the_ranges(engine: str, version: str, words: str) -> None:
    with pytest.raises(InputError) as e:
        rules_for(engine, version)
    msg = str(e.value)
    assert words in msg and "not modelled" in msg
    for row in SGLANG if engine == "sglang" else VLLM:
        assert row.label in msg or not row.modelled  # every modelled range is named


def test_tables_are_contiguous_cited_and_hold_the_source_versions() -> None:
    for rows in (SGLANG, VLLM):
        for a, b in itertools.pairwise(rows):
            assert a.end == b.start  # no gap, no overlap (bounds as they sort: release, post-release)
        for row in rows:
            assert row.start < row.end and row.cite and (row.modelled or row.why_not)
    # the versions whose source kvplan read sit in their own rows
    assert sglang_rules("0.5.23").reference == "0.5.23" and sglang_rules("0.5.9").reference == "0.5.9"
    assert vllm_rules("0.33.0").reference == "0.33.0"
    assert vllm_rules("0.33.0").default_utilization == 0.92  # shared/reference/vllm-0.33.0.md §4


# --------------------------------------------------------------------------- same rules, same plan


@pytest.mark.parametrize(("other", "reference"), [("0.5.20", "0.5.23"), ("0.5.9.post1", "0.5.9")])
def test_sglang_versions_of_one_row_plan_the_same_pool(other: str, reference: str) -> None:
    a = make_plan(engine_version=other)
    b = make_plan(engine_version=reference)
    assert (a.rows, a.cell, a.knob("mem_fraction_static").value) == (
        b.rows,
        b.cell,
        b.knob("mem_fraction_static").value,
    )
    # the output says which rules a version took; the source versions say nothing new
    assert f"SGLang {other} -> rules of {sglang_rules(reference).label}" in a.notes[0]
    assert not any("-> rules of" in n for n in b.notes)


def test_vllm_0_30_plans_as_0_33() -> None:
    a = make_plan("glm-5.3-8xh200-vllm", engine_version="0.30.1")
    b = make_plan("glm-5.3-8xh200-vllm")
    assert a.rows == b.rows and a.available_bytes == b.available_bytes
    assert "vLLM 0.30.1 -> rules of 0.21-0.33" in a.notes[0]


def test_sglang_0_4_refuses_a_dsa_model() -> None:
    with pytest.raises(InputError, match="has no DSA"):
        make_plan(engine_version="0.4.9")


# --------------------------------------------------------------------------- SGLang 0.4.x


@pytest.mark.parametrize(("tp", "mfs"), [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_sglang_0_4_mem_fraction_by_tp(tp: int, mfs: float) -> None:
    # ServerArgs.__post_init__ (0.4.x): tp >= 16 -> 0.79, >= 8 -> 0.81, >= 4 -> 0.85, >= 2 -> 0.87, else 0.88
    p = _llama("engine_version=0.4.4", f"tp={tp}", f"gpus_per_node={tp}", "context_length=8192")
    assert p.knob("mem_fraction_static").value == mfs


def test_sglang_0_4_1_docs_log_from_the_config_alone() -> None:
    """tests/data/logs/field/sglang-llama-3.1-8b-h100-sgl-docs-notebook.log: max_total_num_tokens=444500.

    From the config alone: pre-load free = CUDA total − 1 GiB = 81,105 MiB − 1,024 MiB = 80,081 MiB (78.20 GiB;
    the log says 78.81); weights = the parameter estimate of Llama-3.1-8B (log: 15.09 GiB); mfs 0.88 (the 0.4.x
    table at tp 1, as the log's ServerArgs); cell = 8 kv heads × (128 + 128) × 2 B × 32 layers = 131,072 B.
    """
    p = _llama("engine_version=0.4.1", "tp=1", "gpus_per_node=1")
    pre = 81_105 * MiB - GiB
    weights = p.knob("weights_per_gpu").as_int()
    available = int(((pre - weights) / GiB - pre / GiB * (1 - 0.88)) * GiB)
    assert p.cell.total_bytes == 8 * (128 + 128) * 2 * 32 == 131_072
    assert p.rows == available // 131_072
    assert abs(p.logged_tokens - 444_500) / 444_500 < 0.02  # measured: 440,982 = -0.79 %


# --------------------------------------------------------------------------- vLLM: CUDA graphs in or out


def test_vllm_before_0_21_keeps_cuda_graphs_out_of_the_budget() -> None:
    # the same deployment under 0.19 rules has DEFAULT_CUDAGRAPH_ESTIMATE (1,618 MiB) more KV memory than 0.33
    a = make_plan("glm-5.3-8xh200-vllm", engine_version="0.19.0", gpu_memory_utilization=0.92)
    b = make_plan("glm-5.3-8xh200-vllm")
    assert a.knob("non_kv_other").value == DEFAULT_NON_KV_OTHER - DEFAULT_CUDAGRAPH_ESTIMATE == (6_070 - 1_618) * MiB
    assert a.available_bytes - b.available_bytes == 1_618 * MiB
    bpb = b.extras["bytes_per_block"]
    assert a.extras["num_blocks"] == a.available_bytes // bpb and b.extras["num_blocks"] == b.available_bytes // bpb


def test_vllm_0_19_default_utilization_is_0_9() -> None:
    p = make_plan("glm-5.3-8xh200-vllm", engine_version="0.19.0")
    assert p.knob("gpu_memory_utilization").value == 0.9


def test_vllm_0_19_llmd_planner_tp4_log_from_the_config_alone() -> None:
    """tests/data/logs/field/vllm-llama-3.1-8b-h100-llmd-planner-tp4.log: 'GPU KV cache size: 2,209,792 tokens'.

    From the config and the stated deployment (tp 4, gpu_memory_utilization 0.95, max_model_len 8192):
    requested = ceil(81,105 MiB × 0.95); non-KV = the weights estimate + kvplan's vLLM profile model (no CUDA-graph
    estimate: 0.19 budgets no graphs) = LLAMA_TP4_PROFILE (tests/engines/test_vllm_profile.py derives it); page = 16 ×
    2 kv heads × (128 + 128) × 2 B × 32 layers = 524,288 B per block.
    """
    p = _llama("engine=vllm", "engine_version=0.19.0", "tp=4", "gpus_per_node=4", "gpu_memory_utilization=0.95",
               "context_length=8192")  # fmt: skip
    weights = p.knob("weights_per_gpu").as_int()
    available = math.ceil(81_105 * MiB * 0.95) - weights - LLAMA_TP4_PROFILE
    assert p.extras["bytes_per_block"] == 16 * 2 * 256 * 2 * 32 == 524_288
    assert p.logged_tokens == available // 524_288 * 16
    assert abs(p.logged_tokens - 2_209_792) / 2_209_792 < 0.02  # measured: 2,209,152 = -0.03 %


def test_vllm_0_19_llmd_planner_tp1_log_from_the_profile_model() -> None:
    """The tp 1 log of the same sweep (476,016 tokens): its non-KV memory besides the weights is 1.89 GiB torch
    peak + 0.25 GiB non-torch = 2.14 GiB ('Memory profiling takes' line). The GLM-5.3-calibrated constant (4,452
    MiB) missed it by -3.8 %; the profile model (sampler peak, kept hidden states, cuBLAS, non-torch) lands
    within 0.1 % (+0.02 %), and so does the log's own 2.14 GiB."""
    base = ("engine=vllm", "engine_version=0.19.0", "tp=1", "gpus_per_node=1", "gpu_memory_utilization=0.95",
            "context_length=8192")  # fmt: skip
    default = _llama(*base)
    assert abs(default.logged_tokens - 476_016) / 476_016 < 0.001
    measured = _llama(*base, "weights_per_gpu=14.99GiB", "non_kv_other=2.14GiB")
    assert abs(measured.logged_tokens - 476_016) / 476_016 < 0.001


def test_enforce_eager_drops_the_cuda_graph_estimate_on_vllm() -> None:
    # vLLM 0.33 with --enforce-eager: cudagraph_mode NONE, no estimate -> 1,618 MiB more KV memory
    eager = make_plan("glm-5.3-8xh200-vllm", enforce_eager="true")
    graphs = make_plan("glm-5.3-8xh200-vllm")
    assert eager.deployment.disable_cuda_graph
    assert eager.available_bytes - graphs.available_bytes == DEFAULT_CUDAGRAPH_ESTIMATE == 1_618 * MiB
    assert any("--enforce-eager" in t.label for t in eager.chain)
    # an explicit non_kv_other is the user's figure either way
    same = make_plan("glm-5.3-8xh200-vllm", enforce_eager="true", non_kv_other="5GiB")
    assert same.knob("non_kv_other").value == 5 * GiB


def test_disable_cuda_graph_drops_the_graph_reserve_on_sglang() -> None:
    # H200 TP8 GLM-5.3, pre-load 143,771 MiB: with graphs reserved = 512 + 8192 × 1.5 + 1024 + decode 512 × 2
    # + MLA prefill graph 1536 = 16,384 MiB -> 0.886; without: 512 + 12,288 + 1,024 = 13,824 MiB (over the
    # 10 GiB floor) -> round((143,771 − 13,824) / 143,771, 3) = round(0.90385, 3) = 0.904
    on = make_plan(pre_load_free="143771MiB", weights_per_gpu="88GiB")
    off = make_plan(pre_load_free="143771MiB", weights_per_gpu="88GiB", disable_cuda_graph="true")
    assert (on.extras["mem_fraction_reserved_mib"], on.knob("mem_fraction_static").value) == (16_384, 0.886)
    assert (off.extras["mem_fraction_reserved_mib"], off.knob("mem_fraction_static").value) == (13_824, 0.904)
    assert off.rows > on.rows


# --------------------------------------------------------------------------- the CLI


def test_cli_unmodelled_version_is_exit_2_one_line() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--set", "engine_version=0.3.6"])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: ")
    assert "outside every range" in lines[0] and "0.5.10-0.5.23" in lines[0]


def test_cli_says_which_rules_a_version_took() -> None:
    r = runner.invoke(
        app, ["admit", "--ctx", "128K", "--set", "engine=vllm", "--set", "engine_version=v0.11.0", "--format", "json"]
    )
    assert r.exit_code in (0, 1), r.stderr
    assert "vLLM v0.11.0 -> rules of 0.9-0.20" in r.stdout


def test_doctor_treats_any_0_5_9_build_as_0_5_9() -> None:
    # doctor's hypotheses: no "switch to 0.5.9" and no dcp guesses (0.5.9 has no dcp) for a 0.5.9.post1 deployment
    from kvplan.runbook.doctor.causes import _hypotheses

    p = make_plan(engine_version="0.5.9.post1")
    kinds = [h.key for h in _hypotheses(p.arch, p.deployment, p, {})]
    assert "sglang_0_5_9" not in kinds and "dcp" not in kinds
    assert "sglang_0_5_9" in [h.key for h in _hypotheses(p.arch, make_plan().deployment, make_plan(), {})]


def test_doctor_plans_a_vllm_log_with_the_rules_of_its_own_version() -> None:
    # tests/data/logs/field/vllm-llama-3.1-8b-h100-llmd-planner-tp4.log is from vLLM 0.19.0: the doctor's plan from
    # the config takes the 0.9-0.20 row (utilization set to 0.95 by the log's args; no CUDA-graph estimate)
    from tests.runbook.conftest import body, run_doctor

    text = body(Path("tests/data/logs/field/vllm-llama-3.1-8b-h100-llmd-planner-tp4.log"))
    sets = ("engine=vllm", "gpu=h100", "tp=4", "gpus_per_node=4", "gpu_memory_utilization=0.95", "context_length=8192")
    d = run_doctor(text, sets=(f"model={LLAMA}", *GQA_DEFAULTS, *sets), model=LLAMA)
    assert any("the log is from vLLM 0.19.0: planned with the rules in force then" in n for n in d.notes)
    assert d.config is not None and d.config.engine_version == "0.19.0"
    assert d.config.knob("non_kv_other").value == LLAMA_TP4_PROFILE
