"""The first screen answers (issue 29 item 3): at 80 columns, the first 15 lines of admit carry the verdict in
tokens, the pool in tokens, the binding check with its pages, the smallest fix and the engine's own summary line.

The figures: the default deployment's pool is 567,616 tokens = 8,869 pages × 64 (SGLang 0.5.23
model_runner: available_bytes // cell 53,940 // 64 × 64; README "What `kvplan admit --ctx 1M` says"); a 1M request
is 1,048,576 tokens = 16,384 pages of 64; SGLang logs that pool as max_total_num_tokens=567616 (scheduler.py
prints ints unformatted). --set dcp=2 re-plans to 1,278,208 tokens (README's remedy row).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"})


def _head(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, "\n".join(r.stdout.splitlines()[:15])


def test_admit_1m_rejected_first_screen() -> None:
    code, head = _head("admit", "--ctx", "1M")
    assert code == 1
    flat = " ".join(head.split())
    # tokens first, no pages; the pool rests on an assumed 1 GiB CUDA context + NCCL, so it says its band (issue 28:
    # the pre-load free memory ±1.554 % through SGLang's formula, derived in tests/engines/test_pool_band.py)
    assert flat.startswith(
        "kvplan admit: glm-5.3 on glm-5.3-8xh200-sglang, SGLang 0.5.23 REJECTED: 1,048,576 tokens needed, the pool "
        "holds ≈ 567,616 (band 529,600 – 605,696: pre-load free estimated ±1.6 %)"
    )
    assert "pool pages: needs 16,384 pages, has 8,869" in head  # the page rounding second
    assert "smallest fix   --set dcp=2 (the pool then holds 1,278,208 tokens)" in head
    assert "SGLang 0.5.23 would log:" in head and "max_total_num_tokens=567616, chunked_prefill_size=8192," in head


def test_admit_128k_admitted_first_screen() -> None:
    code, head = _head("admit", "--ctx", "128K")
    assert code == 0
    flat = " ".join(head.split())  # the band as in test_admit_1m_rejected_first_screen
    assert "ADMITTED: 1 × 131,072-token request(s) fit; the pool holds ≈ 567,616 tokens (band 529,600 – 605,696" in flat
    assert "max_total_num_tokens=567616" in head


def test_admit_vllm_first_screen_has_the_vllm_lines() -> None:
    # the vLLM preset (0.33.0): one info_once line, 'GPU KV cache size: N tokens, Maximum concurrency for L tokens
    # per request: X.XXx' (kvplan.engines.log_summary); max_model_len 524,288 is the preset's context_length
    code, head = _head("admit", "--ctx", "128K", "-d", "glm-5.3-8xh200-vllm")
    assert code == 0
    assert "vLLM 0.33.0 would log:" in head
    assert "GPU KV cache size: " in head and "Maximum concurrency for 524,288 tokens per" in head


def test_admit_json_carries_the_engine_lines_as_raw_ints() -> None:
    r = CliRunner(env={"KVPLAN_FORMAT": None}).invoke(app, ["admit", "--ctx", "1M", "--format", "json"])
    log = json.loads(r.stdout)["plan"]["engine_log"]
    assert log["figures"]["max_total_num_tokens"] == 567_616
    assert log["lines"][0].startswith("max_total_num_tokens=567616,")


def test_fit_first_screen_passing() -> None:
    # the chosen candidate's requirement in tokens and the line its engine logs, within 15 lines; for SGLang the
    # pool the verdict row names is the logged max_total_num_tokens itself (every page usable, scheduler.py)
    code, head = _head("fit", "--model", "glm-5.3", "--require-ctx", "1M", "--gpu", "h200", "--engine", "sglang",
                       "--max-gpus", "8")  # fmt: skip
    assert code == 0 and head.splitlines()[1].startswith("FITS")
    flat = " ".join(head.split())
    assert "admits 1,048,576 tokens ok: 1,048,576 tokens needed, the pool holds " in flat
    held = flat.split("the pool holds ≈ ")[1].split()[0]  # an estimate: '≈ N (band …)' (test_pool_band.py)
    assert "SGLang 0.5.23 would log:" in head and f"max_total_num_tokens={held.replace(',', '')}," in flat


def test_fit_first_screen_nothing_fits() -> None:
    # Llama-3.1-8B's config.json: max_position_embeddings 131,072, so a 1M context is over the model's length
    # whatever the GPUs: the fix names the engine's long-context override, not more GPUs
    code, head = _head("fit", "--model", "llama-3.1-8b", "--require-ctx", "1M", "--gpu", "h100", "--max-gpus", "1")
    assert code == 1 and "NOTHING FITS" in head
    flat = " ".join(head.split())
    assert "FAIL (context length): a context length of 1,048,576 tokens needed, the deployment runs 131,072" in flat
    assert "smallest fix over the model's context length" in flat and "would log:" in head


def _gate_repo(tmp_path: Path, config: str) -> None:
    for f in (DATA / "gate").iterdir():
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(DATA / "gate" / "base.yaml", tmp_path / "prod.yaml")
    assert runner.invoke(app, ["lock", "prod.yaml"]).exit_code == 0
    shutil.copy(DATA / "gate" / config, tmp_path / "prod.yaml")


def test_gate_first_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/cli/test_gate.py derives the pools: base 1,278,208 tokens (admits 1M), bf16 676,224 (-47.10 %)
    monkeypatch.chdir(tmp_path)
    _gate_repo(tmp_path, "base.yaml")
    code, head = _head("gate", "prod.yaml")
    assert code == 0 and "GATE PASSED" in head
    flat = " ".join(head.split())
    # the pool rests on the assumed 1 GiB CUDA context + NCCL: it says its band (tests/engines/test_pool_band.py)
    assert "admits 1,048,576 tokens ok: 1,048,576 tokens needed, the pool holds ≈ 1,278,208 (band" in flat
    assert "prod.yaml: SGLang 0.5.23 would log: max_total_num_tokens=1278208," in flat
    shutil.copy(DATA / "gate" / "bf16.yaml", tmp_path / "prod.yaml")
    code, head = _head("gate", "prod.yaml")
    flat = " ".join(head.split())
    assert code == 1 and "GATE FAILED" in head
    assert "binding check prod.yaml: capacity drop <= 0%: pool 1,278,208 -> 676,224 tokens (-47.10%)" in flat
    assert "smallest fix undo the change, or, if the drop is meant, kvplan lock prod.yaml" in flat
    assert "max_total_num_tokens=676224," in flat


def test_doctor_first_screen_quotes_the_log_beside_the_plan() -> None:
    # tests/data/logs/sglang-0.5.23-glm53-dcp8.log line 53 (its header derives it): max_total_num_tokens=3845632,
    # rows 480,704 × dcp 8; the default config plans dcp 1: 567,616. The log reveals dcp 8 (server_args, line 18).
    code, head = _head("doctor", "--log", str(DATA / "logs" / "sglang-0.5.23-glm53-dcp8.log"))
    assert code == 1
    flat = " ".join(head.split())
    assert "pool the config plans 567,616 tokens, the log has 3,845,632" in flat
    assert "the fix --set dcp=8" in flat
    assert "log line 53: max_total_num_tokens=3845632, chunked_prefill_size=8192," in flat
    assert "plan: max_total_num_tokens=567616," in flat
    code, head = _head("doctor", "--log", str(DATA / "logs" / "sglang-0.5.23-glm53-match.log"))
    # the verdict is the first line in capitals after the title, which wraps with the log's path length
    verdict = next(line for line in head.splitlines() if line[:1].isupper())
    assert code == 0 and verdict.startswith("MATCH")
    assert "plan: max_total_num_tokens=567616," in head


def _real_logs() -> list[Path]:
    logs = DATA / "logs"
    return sorted([*logs.glob("doctor-*.log"), *(logs / "field").glob("*.log")])


@pytest.mark.parametrize("log", _real_logs(), ids=lambda p: p.name)
def test_doctor_quotes_the_logs_summary_lines_verbatim(log: Path) -> None:
    # the log's own lines, re-worded from what the parser read in the engine's format, are the log's text
    r = CliRunner(env={"KVPLAN_FORMAT": None}).invoke(app, ["doctor", "--log", str(log), "--format", "json"])
    if r.exit_code == 2:
        pytest.skip("no start-up line")
    # runs of spaces read as one: a paste may align a line by them (aws-samples' 'GPU KV cache size:         1,037,152
    # tokens'), which the doctor quotes in the engine's own spacing; every word and figure must be the log's
    text = re.sub(r" {2,}", " ", log.read_text(encoding="utf-8", errors="replace"))
    for quoted in json.loads(r.stdout)["engine_log"]["log"]:
        assert quoted["text"] in text, quoted


def test_admit_with_a_logged_pool_invents_no_engine_lines() -> None:
    # --pool-tokens puts a log's pool in the plan: the lines that log printed are the engine's, not the planned
    # deployment's (the planned num_blocks would otherwise print beside a pool it does not have)
    code, head = _head("admit", "--ctx", "128K", "--pool-tokens", "600000")
    assert code == 0
    assert "its lines are in the log whose pool --pool-tokens gave" in head and "max_total_num_tokens=" not in head


def test_doctor_refused_start_fix_is_vllms_own_estimate() -> None:
    # tests/data/logs/vllm-0.33.0-glm53-max-seq-len.log line 50: vLLM's refusal "... the estimated maximum model
    # length is 516288" (_check_enough_kv_cache_memory): the max_model_len the server does start with
    log = str(DATA / "logs" / "vllm-0.33.0-glm53-max-seq-len.log")
    code, head = _head("doctor", "--log", log, "--deploy", "glm-5.3-8xh200-vllm")
    assert code == 1 and "REFUSED AT STARTUP (line 50)" in head
    assert "the fix  --set context_length=516288" in head
