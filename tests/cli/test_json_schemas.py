"""Every command's --format json output against the JSON Schema kvplan ships for it (issue 29 item 8).

The schemas (kvplan/schemas/*.json, `kvplan schema COMMAND`) were written from what render/ emits: objects closed
(``additionalProperties: false``) where their keys are field names, maps (memory_map, extras, the lock's configs,
concurrency by context) typed by their values, byte and token figures ``integer``, a field the code can leave
out or null marked so. The outputs come from tests/cli/json_corpus.py (both engines, hybrids, an old SGLang, a
vLLM V0, pipeline stages, a refused start, every doctor log). jsonschema is a dev dependency only: kvplan never
imports it.
"""

from __future__ import annotations

import copy
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

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "kvplan" / "schemas"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})
NO_JSON = {"lock", "schema"}
"""Commands without a report of their own in the corpus below are listed here with the reason in the test."""
GPU_ONLY = {"probe", "validate"}
"""Their JSON needs a GPU (NVML or torch); without one they print the error document, which is checked."""


def validator(command: str) -> Any:
    schema = json.loads(schema_text(command))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


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
        for e in validator(command).iter_errors(doc):
            where = "/".join(map(str, e.absolute_path))
            bad.append(f"{' '.join(args[:6])}: {where}: {e.message[:200]}")
    assert not bad, "\n".join(bad[:30])
    seen = {doc["command"] for _, _, doc in outputs if "command" in doc}
    assert seen == set(schema_names()), set(schema_names()) ^ seen  # each shipped schema checked on real output


def test_every_command_with_json_has_a_schema() -> None:
    names = set(schema_names())
    for command in COMMANDS:
        if command in ("models", "deployments"):
            assert {command, f"{command} show"} <= names  # list ("command": "models") and show
        elif command not in GPU_ONLY | {"schema"}:
            assert command in names, command


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
    assert validator("admit").is_valid(doc)
    change(doc)
    assert not validator("admit").is_valid(doc), why


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
