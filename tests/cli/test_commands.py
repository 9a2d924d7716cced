"""Happy paths of every command: exit codes, output formats, and no GPU stack imported."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

import kvplan
from kvplan.cli import app
from kvplan.render import OutputFormat

# KVPLAN_FORMAT set in the caller's environment must not change what these tests see.
runner = CliRunner(env={"KVPLAN_FORMAT": None})


def invoke(*args: str, **kw: Any) -> Result:
    return runner.invoke(app, list(args), **kw)


def ok(result: Result, code: int = 0) -> str:
    """Exit `code`, a clean stderr, some stdout; returns stdout."""
    detail = f"exit {result.exit_code}\nstdout: {result.stdout[-2000:]!r}\nstderr: {result.stderr!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{result.exception!r}\n{detail}"
    assert result.exit_code == code, detail
    assert result.stderr == "", detail
    assert result.stdout.strip(), detail
    return result.stdout


def admit_json(*args: str, code: int) -> dict[str, Any]:
    data = json.loads(ok(invoke("admit", *args, "--format", "json"), code))
    assert isinstance(data, dict)
    assert data["admitted"] is (code == 0)
    return data


# --------------------------------------------------------------------------- top level


def test_version() -> None:
    assert ok(invoke("--version")) == f"kvplan {kvplan.__version__}\n"


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(flag: str) -> None:
    out = ok(invoke(flag))
    for command in ("admit", "budget", "models", "deployments"):
        assert command in out


def test_command_help() -> None:
    out = ok(invoke("admit", "-h"))
    assert "--ctx" in out and "--pool-tokens" in out


# --------------------------------------------------------------------------- admit


def test_admit_1m_is_rejected_on_the_default_deployment() -> None:
    out = ok(invoke("admit", "--ctx", "1M"), code=1)
    assert "REJECTED" in out.upper()


def test_admit_128k_is_admitted() -> None:
    out = ok(invoke("admit", "--ctx", "128K"))
    assert "ADMITTED" in out.upper()


def test_admit_json_is_raw_integers() -> None:
    data = admit_json("--ctx", "128K", code=0)
    assert data["schema_version"] == 1
    assert data["command"] == "admit"
    plan = data["plan"]
    assert isinstance(plan, dict)
    total = plan["cell"]["total_bytes"]
    assert isinstance(total, int) and not isinstance(total, bool)
    assert total > 0
    assert data["request"] == {"ctx_tokens": 131072, "gen_tokens": 0, "concurrent": 1}


def test_admit_json_rejected_matches_exit_code() -> None:
    data = admit_json("--ctx", "1M", code=1)
    checks = {c["name"]: c["ok"] for c in data["checks"]}
    assert not all(checks.values())


def test_admit_markdown() -> None:
    out = ok(invoke("admit", "--ctx", "128K", "--format", "markdown"))
    assert out.startswith("## ")


def test_format_from_the_environment() -> None:
    out = ok(invoke("admit", "--ctx", "128K", env={"KVPLAN_FORMAT": "json"}))
    assert json.loads(out)["command"] == "admit"


@pytest.mark.parametrize("fmt", list(OutputFormat), ids=lambda f: f.value)
def test_every_output_format(fmt: OutputFormat) -> None:
    ok(invoke("admit", "--ctx", "128K", "--format", fmt.value))


def test_admit_with_the_vllm_preset() -> None:
    # The recipe's max_model_len 1M (the preset ships 512K), which vLLM refuses at startup with TP8 / dcp 1
    # (its KV needs more than the pool): every request is rejected, and lowering context_length admits 128K.
    data = admit_json("--ctx", "128K", "--deploy", "glm-5.3-8xh200-vllm", "--set", "context_length=1M", code=1)
    assert data["plan"]["engine"] == "vllm"
    assert data["binding"] == "engine starts"
    assert data["plan"]["startup_error"]
    fixed = admit_json("--ctx", "128K", "--deploy", "glm-5.3-8xh200-vllm", "--set", "context_length=128K", code=0)
    assert fixed["plan"]["startup_error"] is None


def test_admit_1m_with_pool_tokens_from_a_log_is_rejected() -> None:
    # The runbook question: "my log says 1,000,000 tokens; is a 1M request admitted?"
    # SGLang on the default deployment uses 64-token pages: 1,000,000 // 64 = 15,625 usable pages
    # (SGLang keeps no null page). 1M = 1,048,576 tokens needs 1,048,576 / 64 = 16,384 pages > 15,625.
    data = admit_json("--ctx", "1M", "--pool-tokens", "1000000", code=1)
    assert data["plan"]["logical_page_tokens"] == 64
    assert data["plan"]["usable_pages"] == 15_625
    assert data["need"]["pages"] == 16_384
    assert data["binding"] == "pool pages"
    assert "1,000,000" in str(data["pool_source"])


def test_admit_900k_with_pool_tokens_from_a_log_is_admitted() -> None:
    # 900K = 921,600 tokens = 14,400 pages of 64 <= 15,625 usable pages.
    data = admit_json("--ctx", "900K", "--pool-tokens", "1000000", code=0)
    assert data["need"]["pages"] == 14_400
    assert data["plan"]["usable_pages"] == 15_625


def test_admit_pool_tokens_table_exit_codes() -> None:
    ok(invoke("admit", "--ctx", "1M", "--pool-tokens", "1000000"), code=1)
    ok(invoke("admit", "--ctx", "900K", "--pool-tokens", "1000000"), code=0)


def test_admit_set_dcp_changes_the_plan() -> None:
    base = admit_json("--ctx", "128K", code=0)
    dcp8 = admit_json("--ctx", "128K", "--set", "dcp=8", code=0)
    assert dcp8["plan"]["dcp"] == 8
    assert dcp8["usable_tokens"] != base["usable_tokens"]


def test_admit_concurrent_beyond_the_pool_is_rejected() -> None:
    one = admit_json("--ctx", "128K", code=0)
    n = one["max_concurrent"] + 1
    admit_json("--ctx", "128K", "--concurrent", str(n), code=1)


def test_set_engine_switches_to_that_engines_default_version() -> None:
    # vLLM with the model's 1M max_model_len would not start on this pool; 128K does
    data = admit_json("--ctx", "128K", "--set", "engine=vllm", "--set", "context_length=128K", code=0)
    assert data["plan"]["engine"] == "vllm"
    assert data["plan"]["engine_version"] == "0.33.0"


def test_a_folder_named_like_the_model_does_not_break_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "glm-5.3").mkdir()
    monkeypatch.chdir(tmp_path)
    ok(invoke("admit", "--ctx", "128K"))


def test_a_folder_named_like_the_model_does_not_replace_the_preset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preset = admit_json("--ctx", "128K", code=0)
    text = (resources.files("kvplan") / "configs" / "models" / "glm-5.3.yaml").read_text(encoding="utf-8")
    (tmp_path / "glm-5.3").mkdir()
    (tmp_path / "glm-5.3" / "config.json").write_text(json.dumps(yaml.safe_load(text)["config"]))
    monkeypatch.chdir(tmp_path)
    shadowed = admit_json("--ctx", "128K", code=0)
    assert shadowed["usable_tokens"] == preset["usable_tokens"]


# --------------------------------------------------------------------------- budget and presets


def test_budget() -> None:
    ok(invoke("budget"))


def test_budget_json_contexts() -> None:
    data = json.loads(ok(invoke("budget", "--ctx", "8K,1M", "--format", "json")))
    assert data["command"] == "budget"
    assert [c["tokens"] for c in data["per_context"]] == [8192, 1048576]
    assert all(isinstance(c["total_bytes"], int) for c in data["per_context"])


def test_models_list() -> None:
    out = ok(invoke("models", "list"))
    for name in ("glm-5.3", "glm-5", "deepseek-v3.2"):
        assert name in out


def test_models_show() -> None:
    out = ok(invoke("models", "show", "glm-5.3"))
    assert "GlmMoeDsaForCausalLM" in out and "78" in out


def test_deployments_list() -> None:
    out = ok(invoke("deployments", "list"))
    assert "glm-5.3-8xh200-sglang" in out and "glm-5.3-8xh200-vllm" in out


def test_deployments_show() -> None:
    out = ok(invoke("deployments", "show", "glm-5.3-8xh200-vllm"))
    assert "vllm" in out.lower()


@pytest.mark.parametrize(
    "args",
    [
        ["budget"],
        ["models", "list"],
        ["models", "show", "glm-5.3"],
        ["deployments", "list"],
        ["deployments", "show", "glm-5.3-8xh200-sglang"],
    ],
    ids=" ".join,
)
def test_json_of_every_command(args: list[str]) -> None:
    data = json.loads(ok(invoke(*args, "--format", "json")))
    assert data["schema_version"] == 1


# --------------------------------------------------------------------------- subprocesses: the real entry points


def run_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, check=False)


def test_python_m_kvplan_version() -> None:
    p = run_py("-m", "kvplan", "--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"kvplan {kvplan.__version__}\n"


def test_python_m_kvplan_bad_input_exit_code() -> None:
    p = run_py("-m", "kvplan", "admit", "--ctx", "abc")
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith("kvplan: error: ") and p.stderr.count("\n") == 1


def test_importing_the_cli_loads_no_gpu_stack() -> None:
    code = "import kvplan.cli, sys; assert 'torch' not in sys.modules and 'pynvml' not in sys.modules"
    p = run_py("-c", code)
    assert p.returncode == 0, p.stderr


def test_admit_loads_no_gpu_stack() -> None:
    code = (
        "import sys\n"
        "from kvplan.cli import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(app, ['admit', '--ctx', '1M'])\n"
        "assert r.exit_code == 1, (r.exit_code, r.output)\n"
        "bad = [m for m in ('torch', 'pynvml') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    p = run_py("-c", code)
    assert p.returncode == 0, p.stderr
