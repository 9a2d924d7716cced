"""Every command's --format json output against the JSON Schema kvplan ships for it (issue 29 item 8).

The schemas (kvplan/schemas/*.json, `kvplan schema COMMAND`) were written from what render/ emits: objects closed
(``additionalProperties: false``) where their keys are field names, maps (memory_map, extras, the lock's configs,
concurrency by context) typed by their values, byte and token figures ``integer``, a field the code can leave
out or null marked so. The outputs come from tests/cli/json_corpus.py (both engines, hybrids, an old SGLang, a
vLLM V0, pipeline stages, a refused start, every doctor log). jsonschema is a dev dependency only (kvplan never
imports it); without it tests/cli/schema_check.py validates the keywords the schemas use, so this runs anywhere.
"""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._app import COMMANDS
from kvplan.cli.schema import schema_names, schema_text
from kvplan.render import SCHEMA_VERSION
from tests.cli.json_corpus import cases
from tests.cli.schema_check import KEYWORDS, errors, fallback_errors, used_keywords

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "kvplan" / "schemas"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})
GPU_ONLY = {"probe", "validate"}
"""Their reports need a GPU (NVML, torch): test_gpu_reports_validate renders them from readings made up here."""


def schema(command: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(schema_text(command))
    return doc


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[list[str], int, Any]]:
    tmp = tmp_path_factory.mktemp("corpus")
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        out = []
        for args in cases(tmp):
            r = runner.invoke(app, args)
            out.append((args, r.exit_code, json.loads(r.stdout)))
        return out
    finally:
        os.chdir(cwd)


def test_every_output_validates_against_its_schema(outputs: list[tuple[list[str], int, Any]]) -> None:
    bad = []
    for args, code, doc in outputs:
        assert code in (0, 1) or "error" in doc, (args, code, doc)
        command = doc.get("command") or args[0]
        bad += [f"{' '.join(args[:6])}: {e}" for e in errors(schema(command), doc)]
    assert not bad, "\n".join(bad[:30])
    seen = {doc["command"] for _, _, doc in outputs if "command" in doc}
    assert seen | GPU_ONLY == set(schema_names()), set(schema_names()) ^ seen  # each checked on real output


def test_every_command_with_json_has_a_schema() -> None:
    names = set(schema_names())
    for command in COMMANDS:
        if command in ("models", "deployments"):
            assert {command, f"{command} show"} <= names  # list ("command": "models") and show
        elif command != "schema":
            assert command in names, command


def test_gpu_reports_validate() -> None:
    from kvplan.probes.nvml import GpuReading, Process
    from kvplan.probes.validate import Measured
    from kvplan.render import OutputFormat, emit
    from kvplan.render.probe_report import probe_report, validate_report
    from tests.conftest import make_plan

    h200 = GpuReading(index=0, name="NVIDIA H200", uuid="GPU-0", driver="580.65", cuda_version="13.0", sm=90,
                      total_bytes=150_754_820_096, reserved_bytes=None, used_bytes=1 << 30, free_bytes=149 << 30,
                      memory_api="v1 (v2 unsupported)", processes=(Process(pid=7, used_bytes=None),))  # fmt: skip
    ran = Measured(rank=0, device="cuda:0", tensors=80, predicted_bytes=1 << 30, nbytes=1 << 30, allocated_delta=None,
                   reserved_delta=1 << 30, nvml_used_delta=None, workspace_bytes=0, workspace_ok=True,
                   free_after_bytes=None, slack_bytes=None, notes=("cpu",))  # fmt: skip
    for name, report in (("probe", probe_report((h200,))), ("validate", validate_report(make_plan(), (ran,), None))):
        out = io.StringIO()
        emit(report, OutputFormat.json, out)
        doc = json.loads(out.getvalue())
        assert not errors(schema(name), doc), errors(schema(name), doc)[:3]
        doc["schema_version"] = "1"
        assert errors(schema(name), doc)


def test_schema_version_is_the_one_emitted(outputs: list[tuple[list[str], int, Any]]) -> None:
    for name in schema_names():
        doc = json.loads(schema_text(name))
        assert doc["$defs"]["report"]["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
        assert doc["$defs"]["error"]["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    assert {doc["schema_version"] for _, _, doc in outputs} == {SCHEMA_VERSION}


def _admit(outputs: list[tuple[list[str], int, Any]]) -> dict[str, Any]:
    return copy.deepcopy(next(doc for args, _, doc in outputs if args[:3] == ["admit", "--ctx", "1M"]))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.update(usable_token=d.pop("usable_tokens")), "a renamed field"),
        (lambda d: d["plan"]["cell"].update(total_bytes=str(d["plan"]["cell"]["total_bytes"])), "an int as text"),
        (lambda d: d["plan"]["cell"].update(total_bytes=53_940.5), "a fraction of a byte"),
        (lambda d: d["plan"].pop("logged_tokens"), "a removed field"),
        (lambda d: d["plan"]["extras"].update(slack_bytes="1"), "a map value retyped"),
        (lambda d: d["checks"][0].update(ok="yes"), "a bool as text"),
        (lambda d: d.update(schema_version=2), "another schema version"),
    ],
)
def test_the_schema_catches(outputs: list[tuple[list[str], int, Any]], change: Any, why: str) -> None:
    doc = _admit(outputs)
    assert not errors(schema("admit"), doc) and not fallback_errors(schema("admit"), doc)
    change(doc)
    assert errors(schema("admit"), doc), why
    assert fallback_errors(schema("admit"), doc), why


def test_the_schemas_are_valid_and_use_only_what_the_fallback_checks(outputs: list[tuple[list[str], int, Any]]) -> None:
    for name in schema_names():
        assert used_keywords(schema(name)) <= KEYWORDS, (name, used_keywords(schema(name)) - KEYWORDS)
    jsonschema = pytest.importorskip("jsonschema")
    for name in schema_names():
        jsonschema.Draft202012Validator.check_schema(schema(name))
    for args, _, doc in outputs:  # the two validators agree on every output
        s = schema(doc.get("command") or args[0])
        assert bool(errors(s, doc)) == bool(fallback_errors(s, doc)), args


def test_kvplan_schema_prints_the_shipped_file() -> None:
    r = runner.invoke(app, ["schema", "admit"])
    assert r.exit_code == 0 and r.stdout == (SCHEMAS / "admit.json").read_text()
    assert runner.invoke(app, ["schema", "models show"]).stdout == (SCHEMAS / "models-show.json").read_text()
    assert runner.invoke(app, ["schema", "models list"]).stdout == (SCHEMAS / "models.json").read_text()
    r = runner.invoke(app, ["schema", "nope"])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and "kvplan ships one for: admit," in r.stderr


def test_kvplan_never_imports_jsonschema() -> None:
    code = (
        "import sys\n"
        "from kvplan.cli import app\n"
        "from typer.testing import CliRunner\n"
        "assert CliRunner().invoke(app, ['schema', 'admit']).exit_code == 0\n"
        "assert CliRunner().invoke(app, ['admit', '--ctx', '1M', '--format', 'json']).exit_code == 1\n"
        "assert 'jsonschema' not in sys.modules\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
