"""A deployment preset written for one model, planned with another model: its model-specific knobs are said."""

from __future__ import annotations

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def test_preset_knobs_carried_to_another_model_are_said() -> None:
    # glm-5.3-8xh200-sglang sets kv_cache_dtype fp8_e4m3 and page_size 64 for GLM-5.3; planned with a Llama they
    # still apply (fp8 K/V: 8 kv heads / tp 8 = 1 head × (128 + 128) × 1 B × 80 layers = 20,480 B per token).
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "llama-3.1-70b", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert '"total_bytes": 20480' in r.stdout
    assert "written for glm-5.3; its knobs kv_cache_dtype=fp8_e4m3, page_size=64 apply to llama-3.1-70b" in r.stdout


def test_knobs_overridden_on_the_command_line_are_not_listed() -> None:
    r = runner.invoke(
        app,
        ["admit", "--ctx", "128K", "--model", "llama-3.1-70b", "--set", "kv_cache_dtype=auto", "--set", "block_size=1"],
    )
    assert r.exit_code == 0, r.output
    assert "written for glm-5.3" not in r.stdout


def test_the_presets_own_model_gets_no_note() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K"])
    assert r.exit_code == 0, r.output
    assert "written for" not in r.stdout


def test_a_knob_the_engine_overrides_is_not_claimed_as_applied() -> None:
    # GLM-5.3-Flash on SGLang: the preset's page_size 64 is replaced by 64 × index_kpool 4 = 256 (SGLang's
    # "Setting page size to 256 for DeepSeek DSA."), so the note names only kv_cache_dtype, which it keeps
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "glm-5.3-flash", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert "its knobs kv_cache_dtype=fp8_e4m3 apply to glm-5.3-flash as set" in r.stdout
    assert "page_size=64 apply" not in r.stdout
    assert "Setting page size to 256" in r.stdout
