"""Issue 24 items 3, 8 and 9 on a verbatim public log: every figure the log prints is read before anything is fitted,
like is compared with like, and SGLang's memory chain is checked term by term.

The log: ajith-sirra-amd/Issues GLM-5-FP8-MI355X-SGLANG-ERROR.md, section "Rocm SGLang Docker (20260225)"
(rocm/sgl-dev:v0.5.9-rocm720-mi35x-20260225), zai-org/GLM-5-FP8 at tp 8 with --kv-cache-dtype fp8_e4m3 on
MI355X; kvplan's glm-5 preset is its config (78 layers, kv_lora_rank 512 + rope 64, the indexer on every layer).
The deployment the log states: --model glm-5 --set gpu=mi355x --set engine_version=0.5.9 --set
kv_cache_dtype=fp8_e4m3 (the command's --kv-cache-dtype; the ServerArgs dump has nsa_* fields and the KV line no
'dtype:': 0.5.9 or earlier; the image tag says 0.5.9).
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.models.retarget import retarget
from kvplan.render.doctor_report import doctor_report
from kvplan.runbook.doctor import Diagnosis, diagnose
from kvplan.runbook.parse import parse_log
from kvplan.units import GiB
from tests.runbook.conftest import LOGS, body, line_of
from tests.runbook.test_doctor_verdict import assert_cause_closes_gap

runner = CliRunner(env={"KVPLAN_FORMAT": None})

LOG = LOGS / "doctor-sglang-0.5.9-glm-5-fp8-mi355x-rocm-preload-usage-ajith-sirra-amd-issues.log"
STATED = ("gpu=mi355x", "engine_version=0.5.9", "kv_cache_dtype=fp8_e4m3")


def stated() -> Diagnosis:
    """What `kvplan doctor --log LOG --model glm-5 --set …` (STATED) diagnoses: the
    default deployment retargeted to glm-5 (the glm-5.3 preset's page 64 and fp8 are not carried over)."""
    arch = load_model("glm-5")
    dep = retarget(load_deployment(None, STATED), arch)
    return diagnose(arch, dep, parse_log(body(LOG), LOG.name))


def hundredths(n: int) -> int:
    """Bytes in hundredths of a GiB, rounded: the unit of SGLang's '%.2f GB' memory lines."""
    return (n * 100 + GiB // 2) // GiB


def test_the_logged_row_is_the_allocated_row_not_the_budget_row() -> None:
    # SGLang 0.5.9 get_cell_size_per_token budgets (kv_lora_rank + rope) x 1 B + 132 B of index K on every layer:
    # 78 x (576 + 132) = 55,224 B a row; the pool allocates the row its backend stores: 'KV size: 183.15 GB' for
    # '#tokens: 3199575' is (3,199,575 + 1 padding row) x 78 x (656 + 132) = 196,658,739,264 B = 183.1527 GiB, the
    # 656-B fp8_ds_mla row of decode=flashmla_kv ('Set NSA backends ... decode=flashmla_kv'); the 576-B raw row
    # (kvplan's default on ROCm, 'triton') would print 164.56 GB. Before issue 24 the doctor compared the log's
    # 61,464 B with the 576-B row and said "the rows' bytes differ ... no known cause".
    d = stated()
    text = body(LOG)
    row = next(r for r in d.revealed if r.knob == "mla_layout")
    assert (row.value, row.source, row.line) == (
        "fp8_ds_mla",
        "KV Cache is allocated KV size",
        line_of(text, "#tokens"),
    )
    assert d.byte_fact is not None and d.byte_fact.agrees
    assert d.kv_size is not None and d.kv_size.matches
    # the budget row stays 0.5.9's: 55,224 B (the pool over-commits by 80 B a layer a row)
    assert d.best is not None and d.best.cell.total_bytes == 78 * (576 + 132)
    assert not any("576 B/layer" in c.name for c in d.causes)


def test_memory_chain_term_by_term() -> None:
    # The rank whose 'Load weight end' free memory is smallest (SGLang sizes from the minimum over ranks): TP3,
    # 190.28 GB; its 'Load weight begin' 279.48 GB and 'Memory pool end' 3.88 GB. The plan's GPU is kvplan's MI355X.
    d = stated()
    chain = d.chain
    assert chain is not None and chain.fits_gpu
    total = gpu_catalog()["mi355x"].cuda_total_bytes
    assert chain.total_bytes == total
    held, weights, pool, rest = chain.terms
    text = body(LOG)
    assert held.line == line_of(text, "TP3] Load weight begin")
    # held before loading: total - 279.48 GiB (the 0.5.8.post1 image of the same file printed 283.48 GB)
    assert hundredths(total - held.log_high) == 27_948 == hundredths(total - held.log_low)
    # weights: 279.48 - 190.28 = 89.20 GiB, the 'mem usage=89.20 GB' the line prints itself
    assert weights.log_low <= 8_920 * GiB // 100 <= weights.log_high
    # the pool and its tables: 190.28 - 3.88 = 186.40 GiB, against the plan's tensors for the log's own 3,199,575 rows
    # (like with like): 3,199,576 MLA rows x 78 x 656 B + 3,199,577 index rows x 78 x 132 B = 196,658,749,560 B, plus
    # req_to_token (SGLang 0.5.9 ReqToTokenPool: (max_running_requests 4,096 + 1) x (context 202,752 + 4) x 4 B =
    # 3,322,765,328 B); what is left, 0.14 GiB, is tables kvplan does not model (the allocator's free lists)
    assert pool.log_low <= 18_640 * GiB // 100 <= pool.log_high
    assert pool.name.startswith("the pool and its tables (the log's #tokens")
    assert pool.plan == 196_658_749_560 + 3_322_765_328
    assert 0 < pool.log_low - pool.plan < 160 * 2**20
    # the four terms of each column sum to the GPU's total: the config's 7.52 GiB less held before loading shows up
    # as 7.86 GiB more left over
    assert held.plan + weights.plan + pool.plan + rest.plan == total
    assert hundredths(rest.log_low) == 388 == hundredths(rest.log_high)
    # the plan assumes the runtime holds ~1 GiB before loading (its pre-load free of the config): the 8.52 GiB held
    # on this image is the term that differs; the weights are within 0.2 GiB of the preset's 89.00 GiB
    assert not held.agrees and held.plan < held.log_low and held.delta < -7 * GiB
    assert abs(weights.delta) < GiB // 4


def test_headline_names_the_memory_held_before_loading() -> None:
    # with the log's memory the 0.5.9 accounting gives 176,703,372,693 // 55,224 = 3,199,756 rows (3,199,650 ..
    # 3,199,863 with each figure +-0.005 GiB); the log has 3,199,575: 75 rows (4,141,800 B) under the window, memory
    # taken after the 'Load weight end' line. The config's own memory (pre-load 287.00 GiB) gives 3,336,340 rows:
    # the gap is the memory held before loading, not the accounting.
    d = stated()
    assert d.headline.kind == "memory" and d.comparison is not None and d.comparison.within
    assert d.comparison.logged.value == 3_199_575 and d.comparison.low == 3_199_650
    assert "accounting" not in d.problems
    assert_cause_closes_gap(d, LOG.name)
    verdict = " ".join((doctor_report(d).verdict or "").split())
    assert verdict.startswith("CAUSE: the log's memory, not the accounting")
    assert "held 8.52 GiB" in verdict and "before loading" in verdict and "no known cause" not in verdict


def test_cli_json_carries_the_chain() -> None:
    r = runner.invoke(
        app,
        ["doctor", "--log", str(LOG), "--model", "glm-5", "--set", STATED[0], "--set", STATED[1], "--format", "json"],
    )
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    names = [t["name"] for t in data["memory_chain"]["terms"]]
    assert [n.split(" (")[0] for n in names] == ["memory held before loading", "weights", "the pool and its tables",
                                                 "the rest"]  # fmt: skip
    terms = data["memory_chain"]["terms"]
    assert all(isinstance(t["log_low_bytes"], int) and isinstance(t["plan_bytes"], int) for t in terms)


def test_memory_taken_after_load_is_bounded() -> None:
    # up to 16 MiB (AFTER_LOAD_BYTES) SGLang may take between the 'Load weight end' print and its profile: at the
    # 0.5.9 budget row of 55,224 B that is 16,777,216 // 55,224 = 303 rows under the window, never more, never above
    from kvplan.runbook.memory_chain import rows_taken_after_load, taken_after_load

    d = stated()
    assert d.best is not None and d.best.cell.total_bytes == 55_224
    window = (3_199_650, 3_199_863)
    assert rows_taken_after_load(d.best, "rows") == 303
    assert taken_after_load(d.best, "rows", 3_199_650 - 303, window) is not None
    assert taken_after_load(d.best, "rows", 3_199_650 - 304, window) is None
    assert taken_after_load(d.best, "rows", 3_199_864, window) is None


def test_default_deployment_is_told_the_log_is_from_another_gpu() -> None:
    # the default deployment's H200 holds 139.80 GiB in all (kvplan's catalog: CUDA total), under the 279.48 GiB the
    # log prints free before loading: no term of the chain can be read against it, and the doctor asks for the GPU
    dep = load_deployment(None, ())
    d = diagnose(load_model(dep.model), dep, parse_log(body(LOG), LOG.name))
    assert d.chain is not None and not d.chain.fits_gpu
    assert d.headline.kind == "mismatch" and d.headline.missing[0].startswith("--set gpu=<the log's GPU>")
