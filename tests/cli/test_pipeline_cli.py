"""`kvplan admit` under pipeline parallelism: per-stage rows in the table, a `stages` list of raw integers in JSON,
one line and exit 2 for a partition the engine would refuse (issue 23, item 1)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})
ARGS = (
    "admit", "--ctx", "128K", "--model", "llama-3.1-70b", "--set", "engine=sglang", "--set", "gpu=h100",
    "--set", "tp=4", "--set", "pp=2", "--set", "kv_cache_dtype=auto",
)  # fmt: skip


def test_json_lists_every_stage() -> None:
    r = runner.invoke(app, [*ARGS, "--set", "pp_layer_partition=41,39", "--format", "json"])
    assert r.exit_code == 0, r.stdout + r.stderr
    stages = json.loads(r.stdout)["plan"]["stages"]
    # SGLANG_PP_LAYER_PARTITION=41,39: layers [0, 41) with the embedding, [41, 80) with the LM head; GQA rows of
    # 2 kv heads × (128 + 128) × 2 B = 1,024 B a layer
    assert [(s["start_layer"], s["end_layer"], s["embedding"], s["lm_head"]) for s in stages] == [
        (0, 41, True, False),
        (41, 80, False, True),
    ]
    assert [s["cell_bytes"] for s in stages] == [41 * 1_024, 39 * 1_024]
    assert all(isinstance(s["weights_bytes"], int) and isinstance(s["rows_per_gpu"], int) for s in stages)
    assert sum(s["binding"] for s in stages) == 1


def test_table_says_what_each_stage_holds() -> None:
    r = runner.invoke(app, list(ARGS))
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "Pipeline stages (pp 2)" in r.stdout
    assert "1024 B (bf16) × 40 layers" in r.stdout  # was × 80 layers on every GPU


def test_bad_partition_is_one_line_exit_2() -> None:
    r = runner.invoke(app, [*ARGS, "--set", "pp_layer_partition=41,40"])
    assert r.exit_code == 2
    assert "Traceback" not in r.stdout + r.stderr
    assert "summing to 81 layers" in r.stderr and "SGLANG_PP_LAYER_PARTITION" in r.stderr
