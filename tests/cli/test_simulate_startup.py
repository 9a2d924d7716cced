"""Issue 31 item 4 for ``simulate``: a replay under ideal semantics (one capacity, the LRU curve, the FIFO curve)
loads no engine pool, engine replay, SGLang policy table or process pool; those are for engine semantics and
per-capacity sweeps (kvplan/sim/run.py). About 20 ms of a 0.4 s FIFO curve at 12K requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.modules_probe import run_probe

ENGINE_ONLY = {
    "kvplan.sim.replay",
    "kvplan.sim.registry",
    "kvplan.sim.radix",
    "kvplan.sim.paging",
    "kvplan.sim.blockpool",
    "kvplan.sim.blockchunks",
    "concurrent.futures.process",
}


def _trace(tmp_path: Path) -> Path:
    # three requests, 512-token blocks, the second and third share the first's two blocks
    lines = [
        {"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]},
        {"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [0, 1, 2]},
        {"timestamp": 2, "input_length": 1536, "output_length": 1, "hash_ids": [0, 1, 3]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _run(*argv: str) -> tuple[dict[str, object], set[str]]:
    out, mods = run_probe(*argv)
    return json.loads(out), mods


@pytest.mark.parametrize(
    "extra",
    [
        ["--capacity", "2 blocks"],
        ["--sweep", "1 blocks,2 blocks,3 blocks"],
        ["--sweep", "1 blocks,2 blocks,3 blocks", "--policy", "fifo"],
    ],
)
def test_an_ideal_replay_loads_no_engine_code(tmp_path: Path, extra: list[str]) -> None:
    out, mods = _run("simulate", str(_trace(tmp_path)), "--format", "json", *extra)
    assert out  # it ran and reported
    assert not mods & ENGINE_ONLY, sorted(mods & ENGINE_ONLY)


def test_an_engine_replay_still_loads_its_pool(tmp_path: Path) -> None:
    # the lazy imports are reached: SGLang semantics (its preset deployment) replays through the radix cache
    out, mods = _run(
        "simulate", str(_trace(tmp_path)), "--format", "json", "--semantics", "sglang", "--capacity", "2048"
    )
    assert out
    assert {"kvplan.sim.replay", "kvplan.sim.radix", "kvplan.sim.paging"} <= mods
