"""`kvplan fit` end to end: the verdict's exit codes, bad input, --emit-deploy round-trips through admit.

GLM-5.3 on H200 / SGLang, --max-gpus 8 (figures in tests/plan/test_fit.py): 1M is admitted first at 8 GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
SMALL = ("--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off")


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def test_fit_prints_frontier_and_emits_a_deployment_admit_plans_as_is(tmp_path: Path) -> None:
    out = tmp_path / "best.yaml"
    r = run("fit", *SMALL, "--require-ctx", "1M", "--require-concurrency", "4@128K", "--emit-deploy", str(out))
    assert r.exit_code == 0, r.output
    # the best layout is TP8 DPA4: attention split 2 ways, not the measured TP8 point's split, so its weights are the
    # per-tensor estimate of a DSA model, ±6.0 % (kvplan.models.weights_band.PER_TENSOR_DSA), and the headline says so
    assert "FITS (weights estimated ±6.0 %): 8 × NVIDIA H200" in r.output and "Frontier" in r.output
    text = out.read_text()
    assert "engine: sglang" in text and "tp: 8" in text
    a = run("admit", "--deploy", str(out), "--ctx", "1M")
    assert a.exit_code == 0 and "ADMITTED" in a.output, a.output
    b = run("admit", "--deploy", str(out), "--ctx", "128K", "-n", "4")
    assert b.exit_code == 0 and "ADMITTED" in b.output, b.output


def test_fit_json_best_matches_the_emitted_plan(tmp_path: Path) -> None:
    out = tmp_path / "best.yaml"
    r = run("fit", *SMALL, "--require-ctx", "1M", "--format", "json", "--emit-deploy", str(out))
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert doc["fits"] and doc["best"]["gpus"] == 8 and doc["best"]["admitted"]
    admit = json.loads(run("admit", "--deploy", str(out), "--ctx", "1M", "--format", "json").output)
    assert json.dumps(admit).count(str(doc["best"]["pool_tokens"])) >= 1  # the same pool, planned as-is


def test_impossible_requirement_exits_1_with_the_closest_candidate(tmp_path: Path) -> None:
    # 10,000 × 1M tokens is past any 8-GPU pool (TP8 dcp 8 DPA8 holds a few tens of 1M requests)
    out = tmp_path / "none.yaml"
    r = run("fit", *SMALL, "--require-concurrency", "10000@1M", "--emit-deploy", str(out))
    assert r.exit_code == 1, r.output
    assert "NOTHING FITS (weights estimated ±6.0 %) up to 8 GPUs; closest:" in r.output  # a DPA layout, estimated
    assert "lacks: admits 10000 × 1,048,576 tokens: rejected by" in r.output
    assert not out.exists()  # nothing written when nothing fits


def test_malformed_requirements_exit_2() -> None:
    for args in (("--require-concurrency", "4x128K"), ("--require-ctx", "lots"), ("--require-concurrency", "0@1M")):
        r = run("fit", *SMALL, *args)
        assert r.exit_code == 2, (args, r.output)
        assert "kvplan: error:" in r.output and "Traceback" not in r.output


def test_bad_options_exit_2() -> None:
    assert run("fit", *SMALL).exit_code == 2  # no requirement
    assert run("fit", "--model", "glm-5.3", "--gpu", "h9000", "--require-ctx", "1M").exit_code == 2
    assert run("fit", "--model", "glm-5.3", "--engine", "trt", "--require-ctx", "1M").exit_code == 2
    assert run("fit", "--model", "glm-5.3", "--max-gpus", "4096", "--require-ctx", "1M").exit_code == 2
    assert run("fit", "--model", "glm-5.3", "--mtp", "maybe", "--require-ctx", "1M").exit_code == 2


def test_plot(tmp_path: Path) -> None:
    out = tmp_path / "fit.png"
    r = run("fit", *SMALL, "--require-concurrency", "4@128K", "--plot", str(out))
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_help() -> None:
    r = run("fit", "--help")
    assert r.exit_code == 0 and "--require-concurrency" in r.output and "\\[" not in r.output


def test_fit_imports_no_torch_nvml_or_matplotlib() -> None:
    """A planning command: no torch, pynvml or matplotlib at module level (only --plot imports matplotlib)."""
    import subprocess
    import sys

    probe = (
        "import json, sys\nfrom kvplan.cli import main\nsys.argv = ['kvplan', *sys.argv[1:]]\ntry:\n    main()\n"
        "except SystemExit:\n    pass\nsys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, "fit", *SMALL, "--require-ctx", "1M"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    mods = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert "kvplan.plan.fit" in mods
    assert not mods & {"torch", "pynvml", "matplotlib"}


def test_pd() -> None:
    r = run("fit", *SMALL, "--require-ctx", "1M", "--require-concurrency", "16@128K", "--pd")
    assert r.exit_code == 0, r.output
    assert "FITS (PD) (weights estimated ±6.0 %): 8 prefill + 8 decode GPUs" in r.output
    assert "--disaggregation-mode prefill" in r.output
    assert run("fit", *SMALL, "--require-ctx", "1M", "--pd", "--link", "fast").exit_code == 2
    assert run("fit", *SMALL, "--require-ctx", "1M", "--pd", "--emit-deploy", "x.yaml").exit_code == 2
    assert run("fit", *SMALL, "--require-concurrency", "10000@1M", "--pd").exit_code == 1
