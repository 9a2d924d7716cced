"""Issue 24: the doctor's headline agrees with its own checks.

A property over the whole corpus of real public start-up logs (tests/data/logs/field, doctor-*, ../shared/logs;
each with its provenance header): a headline that names a cause names one which, applied to the plan, moves the
planned pool toward the log's figure by more than half the gap -- else the headline is CANNOT TELL or MISMATCH with
what to add -- and with no --model no cause is named from a model the log does not identify. Then one regression
test per item, each on a verbatim public log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook.doctor import Diagnosis, diagnose
from kvplan.runbook.parse import parse_log
from kvplan.runbook.verdict import closes_gap
from tests.runbook.conftest import LOGS, SHARED_LOGS, line_of
from tests.runbook.test_doctor_corpus import corpus
from tests.runbook.test_field_logs import DOCTOR_CASES, DoctorCase, config_path, text_of

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def body(path: Path) -> str:
    """A corpus log without its provenance header (comment lines up to the first blank line), as a server wrote it."""
    return path.read_text(encoding="utf-8").split("\n\n", 1)[1]


def assert_cause_closes_gap(d: Diagnosis, what: str) -> None:
    h = d.headline
    if h.kind in ("mismatch", "cannot_tell"):
        assert h.missing, (what, "a headline that names no cause says what to add", h)
    if h.kind != "cause":
        return
    c = d.comparison
    assert c is not None and c.logged.unit != "needed", (what, "a cause with no pool to compare", h)
    logged = c.logged.value
    if h.cause is not None:
        # the cause's plan: its pool against the plan it was tested on (with the log's memory where it prints it)
        assert closes_gap(c.expected, h.cause.value, logged), (what, h.cause.name, c.expected, h.cause.value, logged)
    else:
        # the knob the headline names (the first drift where no knob is recorded)
        r = next(r for r in d.revealed if r.drift and r.knob == (getattr(h, "knob", "") or r.knob))
        assert closes_gap(r.config_pool, r.pool_after, logged), (what, r.knob, r.config_pool, r.pool_after, logged)


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.name.removesuffix(".log"))
def test_corpus_default_deployment_cause_closes_the_gap(path: Path) -> None:
    # the default deployment's plan of every corpus log (what `kvplan doctor --log` compared before it read the log
    # alone): any cause it names must close more than half the gap
    dep = load_deployment(None, ())
    try:
        d = diagnose(load_model(dep.model), dep, parse_log(body(path), path.name))
    except InputError:  # the default cannot be planned for this log (the CLI then reads it alone)
        return
    assert_cause_closes_gap(d, path.name)


@pytest.mark.parametrize("case", DOCTOR_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_corpus_stated_deployment_cause_closes_the_gap(case: DoctorCase, tmp_path: Path) -> None:
    cfg = config_path(case.model, tmp_path)
    dep = load_deployment(None, (f"model={cfg}", *case.sets))
    d = diagnose(load_model(cfg), dep, parse_log(text_of(case.log), case.log))
    assert_cause_closes_gap(d, case.log)


def doctor_json(path: Path, *args: str) -> tuple[int, dict[str, object]]:
    r = runner.invoke(app, ["doctor", "--log", str(path), "--format", "json", *args])
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


def test_item1_a_knob_that_leaves_the_gap_is_no_cause() -> None:
    """vLLM V0 0.4.1 on a W7900 (doctor-vllm-v0-0.4.1-llama-3-8b-w7900-rocm-augmxnt.log, '# GPU blocks: 12003')
    against the default deployment's plan: kvplan's GLM-5.3 plan gives 8,068 blocks with the config's memory; the
    log's max_model_len 8,192 takes it to 8,697 (629 of the 3,935-block gap, 16 %), its tp 1 to 0 (away). Before
    the fix the headline read "CAUSE: the server ran tp 1 where the config has 8; ... pool 8,068 → 0": a knob that
    moves the pool away from the log's was named. No knob closes half the gap: no cause."""
    path = LOGS / "doctor-vllm-v0-0.4.1-llama-3-8b-w7900-rocm-augmxnt.log"
    dep = load_deployment(None, ())
    d = diagnose(load_model(dep.model), dep, parse_log(body(path), path.name))
    assert d.comparison is not None and d.comparison.logged.value == 12_003
    assert d.headline.kind != "cause", d.headline
    assert_cause_closes_gap(d, path.name)


def test_item2_rows_one_percent_over_are_not_another_model() -> None:
    """vllm-project/vllm#21348 (doctor-vllm-qwen3-235b-fp8-h100-tp4-issue-21348.log) with the model the thread names,
    Qwen3-235B-A22B at tp 4, bf16 KV: 94 layers x max(1, 4 // 4) kv head x 128 x 2 (K, V) x 2 B = 48,128 B a token.
    The log's 'Available KV cache memory: 8.11 GiB' (±0.005 GiB) over 178,880 tokens is 48,582 .. 48,710 B a token,
    +0.9 .. +1.2 % (the LMCache connector's run: the issue's own question). Before the fix: ANOTHER MODEL."""
    path = LOGS / "doctor-vllm-qwen3-235b-fp8-h100-tp4-issue-21348.log"
    sets = ("tp=4", "engine=vllm", "kv_cache_dtype=auto", "gpu=h100-sxm")
    _, data = doctor_json(path, "--model", "qwen3-235b-a22b", *(a for s in sets for a in ("--set", s)))
    h = data["headline"]
    assert isinstance(h, dict)
    assert h["kind"] != "model", h
    assert h["kind"] in ("mismatch", "cannot_tell") and h["missing"], h  # says what to add
    assert "+1.1 %" in " ".join(h["missing"]), h["missing"]


def test_item5_pool_lines_alone_take_no_cause_from_the_default_model(tmp_path: Path) -> None:
    """kvcache-ai/ktransformers#1804 (doctor-sglang-kt-deepseek-v3-max-total-tokens-cap-ktransformers-1804.log): the
    pool lines a person pastes, without the 'Load weight end. type=DeepseekV3ForCausalLM' line above them (a cut of
    the verbatim log: no line edited). Nothing left names the model, so the default deployment's GLM-5.3 is not the
    log's: before the fix the doctor said "CAUSE: a --max-total-tokens cap" from GLM-5.3's plan."""
    lines = body(LOGS / "doctor-sglang-kt-deepseek-v3-max-total-tokens-cap-ktransformers-1804.log").splitlines()
    assert "type=DeepseekV3ForCausalLM" in lines[0]
    cut = tmp_path / "pool-lines.log"
    cut.write_text("\n".join(lines[1:6]) + "\n", encoding="utf-8")
    code, data = doctor_json(cut)
    h = data["headline"]
    assert isinstance(h, dict)
    assert h["kind"] == "cannot_tell" and h["cause"] is None and h["missing"], h
    assert code == 0


def test_item5_no_comparison_with_the_default_model_for_an_unnamed_log() -> None:
    """mitchross/talos-argocd-proxmox#1995: the two pool lines of a Qwen3.8-27B-FP8 (GDN hybrid) start, no line that
    names the model. Before the fix the doctor compared them with GLM-5.3's plan ("the config's memory gives
    516,352 tokens"), a figure of a model the log is not about; now it reads the log alone."""
    path = LOGS / "doctor-vllm-hybrid-qwen3.8-27b-fp8-tp2-pool-lines-talos-argocd-pr-1995.log"
    r = runner.invoke(app, ["doctor", "--log", str(path)])
    assert r.exit_code == 0, r.output
    assert "CANNOT TELL" in r.output and "names no model" in r.output
    assert "516,352" not in r.output and "against glm-5.3" not in r.output


def test_item10_a_start_that_dies_in_cuda_graph_capture_is_a_failed_start() -> None:
    """sgl-project/sglang#7227: the pool is built ('#tokens: 132681, K size: 9.11 GB': 132,682 rows x 36 layers x 8
    kv heads x 128 x 2 B = 9.11 GiB), then 'Scheduler hit an exception' during CUDA-graph capture. Before the fix:
    one normal start (lines 1-3), CANNOT TELL; now a failed start at the exception's line."""
    path = LOGS / "doctor-sglang-qwen3-cuda-graph-capture-exception-after-pool-issue-7227.log"
    log = parse_log(body(path), path.name)
    assert len(log.runs) == 1 and log.chosen.errors, log.chosen
    r = runner.invoke(app, ["doctor", "--log", str(path)])
    assert r.exit_code == 1, r.output
    line = line_of(path.read_text(encoding="utf-8"), "] Scheduler hit an exception")
    assert f"FAILED AT STARTUP (line {line}): SGLang printed 'Scheduler hit an exception'" in " ".join(r.output.split())


def test_item5_a_repeated_pool_pair_is_one_start_and_the_worker_exception_fails_it() -> None:
    """nlzy/vllm-gfx906#44: one EngineCore (pid 4661) prints the same 'GPU KV cache size: 305,808 tokens' /
    'Maximum concurrency for 16,384 tokens per request: 18.67x' pair four times, then a worker dies in CUDA-graph
    capture. Before the fix: four server starts, the last one read as a normal start."""
    path = LOGS / "doctor-vllm-repeated-pool-pair-worker-exception-gfx906-vllm-gfx906-44.log"
    log = parse_log(body(path), path.name)
    assert len(log.runs) == 1
    k = log.chosen.kv_cache_size
    assert k is not None and k.value.tokens == 305_808 and len(log.chosen.errors) == 1
    code, data = doctor_json(path)
    h = data["headline"]
    assert isinstance(h, dict) and h["kind"] == "refused" and code == 1, h


def test_item5_a_refusal_pasted_over_three_lines_is_a_refused_start() -> None:
    """eugr/spark-vllm-docker#396: vLLM's 'To serve at least one request …' refusal pasted over three lines behind a
    '▎' quote bar (max_model_len 196,608 needs 23.25 GiB, 22.5 GiB available, vLLM's estimate 190,272). Before the
    fix nothing in it was read as a refusal. With the log alone the doctor names no model, so it never says
    "kvplan's plan predicts it"."""
    path = LOGS / "doctor-vllm-maxlen-refusal-three-line-paste-spark-vllm-docker-396.log"
    e = parse_log(body(path), path.name).chosen.max_len_error
    assert e is not None
    assert (e.value.max_model_len, e.value.needed.text, e.value.available.text) == (196_608, "23.25", "22.5")
    assert e.value.estimated_max_len == 190_272
    r = runner.invoke(app, ["doctor", "--log", str(path)])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "REFUSED AT STARTUP" in text and "max_model_len 196,608 needs 23.25 GiB" in text
    assert "predicts" not in text


def test_item3_a_negative_profiled_value_is_a_pool_outcome() -> None:
    """sgl-project/sglang#7691 (SGLang 0.4.8.post1, MI300X x 8): 'max_total_tokens=131072 is larger than the profiled
    value -561981' on every rank. SGLang's init_memory_pool then takes min(-561,981, 131,072) <= 0 and raises 'Not
    enough memory' (model_runner.py): no pool. Before the fix: 'CANNOT TELL ... the log stops before the pool
    lines' (with --model deepseek-v3) / the log alone read as a start cut short."""
    path = LOGS / "doctor-sglang-0.4.8-negative-profiled-value-deepseek-r1-mi300x-issue-7691.log"
    run = parse_log(body(path), path.name).chosen
    assert run.negative_profile is not None and "-561981" in run.negative_profile.value
    r = runner.invoke(app, ["doctor", "--log", str(path), "--model", "deepseek-v3", "--set", "tp=8"])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    line = line_of(path.read_text(encoding="utf-8"), "] max_total_tokens=131072")
    assert (
        f"REFUSED AT STARTUP (line {line}): SGLang: max_total_tokens=131072 is larger than the profiled value -561981"
        in text
    )
    assert "stops before" not in text


def test_item7_refusal_text_units_and_no_prediction_from_other_figures() -> None:
    """vllm-project/vllm#44376 (field/vllm-hybrid-deepseek-v4-flash-gh200-tp2-vllm-issue-44376.log) with its stated
    deployment: vLLM printed 6.66 GiB needed, 5.44 GiB available, estimate 13,528 tokens; kvplan's 0.33.0 V4 packing
    needs 6.35 GiB (the header's known gap: 1,002,240 B a block id against the log's 1,050,846 .. 1,052,424 B).
    Before the fix the findings said "the pool is 6.35 GiB (6.82 GB) instead of 6.35 GiB (6.82 GB)" (a figure
    against itself), "+335,888,547" (bytes without a unit), and "the largest max_model_len that fits is 13,528
    (kvplan: 1,490,432 – 1,493,248, DIFFERS): kvplan's plan predicts the refusal" (a uniform bisection applied to a
    hybrid, and a prediction its own figures contradict)."""
    path = LOGS / "field" / "vllm-hybrid-deepseek-v4-flash-gh200-tp2-vllm-issue-44376.log"
    sets = ("tp=2", "gpu=gh200", "engine=vllm", "context_length=30000", "kv_cache_dtype=fp8",
            "gpu_memory_utilization=0.95", "page_size=256")  # fmt: skip
    r = runner.invoke(
        app, ["doctor", "--log", str(path), "--model", "deepseek-v4-flash", *(a for s in sets for a in ("--set", s))]
    )
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "REFUSED AT STARTUP" in text and "the largest that fits is 13,528 tokens" in text
    assert "predicts" not in text and "does not predict this one" in text
    assert "1,490,432" not in text  # no uniform-block estimate for a hybrid
    assert "instead of 6.35 GiB" not in text
    assert re.search(r"the log says 6\.66 GiB \([\d.]+ GB\) \(\+[\d.]+ MiB \([\d.]+ MB\), ", text), text


def test_item7_a_knobs_pool_change_is_in_tokens_beside_a_refusal() -> None:
    """vllm-project/vllm#25350 (doctor-vllm-max-seq-len-kvfp8-issue-25350.log) checked against --model glm-5.3:
    the refusal's logged figure is bytes (10.12 GiB needed), the knob's pools are tokens. Before the fix: "knob
    context_length: the server ran 221000 …: pool 516,352 → 535,744 B needed" and "the pool is 11.10 GiB (11.92
    GB) instead of 11.10 GiB (11.92 GB)"."""
    path = LOGS / "doctor-vllm-max-seq-len-kvfp8-issue-25350.log"
    r = runner.invoke(app, ["doctor", "--log", str(path), "--model", "glm-5.3"])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    knob = re.search(r"knob context_length: the server ran 221000 .*?: pool [\d,]+ → [\d,]+ (\w+)", text)
    assert knob is not None and knob.group(1) == "tokens", text
    assert not re.search(r"the pool is ([\d.]+ GiB \([\d.]+ GB\)) instead of \1", text)


def test_item4_the_logs_dcp_multiplier_ranks_the_model_and_writes_the_deployment(tmp_path: Path) -> None:
    """shared/logs/vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log: 'Available KV cache memory: 46.80 GiB' and
    'Multiplying the GPU KV cache size by the dcp_world_size 8' before 'GPU KV cache size: 5,721,088 tokens': each
    logged token is 1/8 of a rank's row, so 46.80 GiB (±0.005) / 5,721,088 = 8,783 .. 8,784 B a logged token = a
    rank's 70,272 B (Kimi-K2's MLA latent: 61 layers x (512 + 64) x 2 B) / 8. Before the fix the doctor ranked
    "gpt-oss-120b at tp 4" (9,216 B) first, never named kimi-k2, and --emit-deploy wrote 'tp: 1' and no dcp."""
    path = SHARED_LOGS / "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    out = tmp_path / "dep.yaml"
    code, data = doctor_json(path, "--emit-deploy", str(out))
    assert code == 0
    evidence = data["evidence"]
    assert isinstance(evidence, dict)
    fits = {c["name"]: c["bytes_per_row"] for c in evidence["candidates"] if c["fits"]}
    assert fits.get("kimi-k2 at dcp 8") == 61 * (512 + 64) * 2 // 8  # 8,784 B
    assert not any(name.startswith("gpt-oss") for name in fits)
    lines = {
        ln.split(":")[0]: ln.split(":")[1].split("#")[0].strip() for ln in out.read_text().splitlines() if ":" in ln
    }
    assert lines["dcp"] == "8" and lines["tp"] == "8"  # vLLM: tp a multiple of dcp


def test_item5_a_qwen36_log_gets_no_cause_from_the_default_model() -> None:
    """noonghunna/club-3090#295: Qwen3.6-27B on 2 x RTX 3090, vLLM's pool pair ('GPU KV cache size: 620,944 tokens',
    concurrency at 262,144) pasted above the non-default args line that names the model. Before the fix: "CAUSE: the
    server ran context_length 262,144 where the config has 1048576; with the config's memory: pool 516,352 →
    531,712" -- glm-5.3's plan, a model the log is not about, and a knob that closes 15,360 of the 104,592-token
    gap (15 %)."""
    path = LOGS / "doctor-vllm-qwen3.6-27b-pool-then-args-club-3090-295.log"
    code, data = doctor_json(path)
    h = data["headline"]
    assert isinstance(h, dict)
    assert h["kind"] == "cannot_tell" and h["cause"] is None and h["missing"], h
    assert code == 0
    r = runner.invoke(app, ["doctor", "--log", str(path)])
    text = " ".join(r.output.split())
    assert "CAUSE" not in text and "qwen3.6-27b-autoround-int4" in text  # the model the paste names, said


def test_item5_a_bare_enginecore_failed_to_start_is_a_failed_start() -> None:
    """vllm-project/vllm#17979: a V1 start loads 0.2533 GiB of weights, compiles, then prints 'EngineCore failed to
    start.' (vllm/v1/engine/core.py, run_engine_core). Before the fix: "CANNOT TELL: … the log stops before" the
    pool lines, against glm-5.3's plan."""
    path = LOGS / "doctor-vllm-v1-enginecore-failed-to-start-issue-17979.log"
    r = runner.invoke(app, ["doctor", "--log", str(path)])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    line = line_of(path.read_text(encoding="utf-8"), "] EngineCore failed to start.")
    assert f"FAILED AT STARTUP (line {line}): vLLM printed 'EngineCore failed to start'" in text
    assert "stops before" not in text
