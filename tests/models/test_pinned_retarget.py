"""A deployment file planned with another model (kvplan/models/retarget.py), pinned where the mutation check moves
it: a file that names no model, or the model planned, is applied as written (no note); a built-in preset's model
knobs go back to the engine's defaults, no longer counted as set or as the file's, so a second pass changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.retarget import retarget, written_for

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def _plan(args: list[str]) -> dict[str, Any]:
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    plan: dict[str, Any] = json.loads(r.stdout)["plan"]
    return plan


def test_a_users_file_naming_no_model_applies_with_no_note(tmp_path: Path) -> None:
    # no model: key (--set gives it), so the file was written for whatever model is planned
    mine = tmp_path / "mine.yaml"
    mine.write_text("engine: vllm\ngpu: h100\ntp: 4\nkv_cache_dtype: fp8\n")
    dep = load_deployment(str(mine), ["model=llama-3.1-70b"])
    assert dep.written_for == "" and written_for(dep, load_model("llama-3.1-70b"))
    plan = _plan(["budget", "--model", "llama-3.1-70b", "--deploy", str(mine), "--set", "model=llama-3.1-70b"])
    assert plan["written_for_another_model"] is None
    # fp8 applies: 80 layers × 8 / 4 kv heads × 2 (K, V) × 128 × 1 B = 40,960 B a token
    assert plan["cell"]["total_bytes"] == 40_960


def test_a_users_file_naming_the_model_planned_gets_no_note(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("model: Llama-3.1-70B\nengine: vllm\ngpu: h100\ntp: 4\n")  # any case: names compare lowered
    assert written_for(load_deployment(str(mine), []), load_model("llama-3.1-70b"))
    assert _plan(["budget", "--model", "llama-3.1-70b", "--deploy", str(mine)])["written_for_another_model"] is None


def test_dropped_knobs_are_no_longer_set_nor_the_files() -> None:
    # the SGLang preset's kv_cache_dtype fp8_e4m3 and page_size 64 are GLM-5.3's: for Llama they are the engine's
    # defaults again (Deployment's None / auto), neither explicit (shown 'set') nor from the file
    dep = load_deployment("glm-5.3-8xh200-sglang", [])
    assert {"kv_cache_dtype", "page_size"} <= dep.explicit & dep.from_file
    out = retarget(dep, load_model("llama-3.1-70b"))
    assert (out.kv_cache_dtype, out.page_size) == ("auto", None)
    assert not {"kv_cache_dtype", "page_size"} & (out.explicit | out.from_file)
    assert {"tp", "nodes"} <= out.explicit  # the hardware and layout knobs stay
    assert out.carry is not None and out.carry.dropped == (("kv_cache_dtype", "fp8_e4m3"), ("page_size", 64))


def test_retargeting_twice_is_retargeting_once() -> None:
    # what the first pass dropped is not the file's any more, so a second pass drops nothing new
    arch = load_model("llama-3.1-70b")
    once = retarget(load_deployment("glm-5.3-8xh200-sglang", []), arch)
    twice = retarget(once, arch)
    assert twice.carry is not None and twice.carry.dropped == ()
    assert (twice.kv_cache_dtype, twice.page_size, twice.from_file) == (
        once.kv_cache_dtype,
        once.page_size,
        once.from_file,
    )
