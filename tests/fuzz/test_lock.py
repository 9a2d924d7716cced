"""Fuzz the lock reader (issue 10): random JSON documents and random mutations of a real lock.

`kvplan gate prod.yaml` against each ends in exit 0 or 1 (a lock it accepts) or 2 with one error line; never a
traceback, never exit 4. And the reader on its own either returns entries whose every field has its type and
bounds, or raises InputError.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.limits import MAX_GPU_BYTES, MAX_TOKENS
from kvplan.plan.gate import Figures, parse_lock

DATA = Path(__file__).parents[1] / "data" / "gate"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})


@pytest.fixture(scope="module")
def real_lock(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("lock")
    shutil.copy(DATA / "base.yaml", d / "prod.yaml")
    r = runner.invoke(app, ["lock", str(d / "prod.yaml"), "--lock", str(d / "kvplan.lock")])
    assert r.exit_code == 0, r.stderr
    doc: dict[str, Any] = json.loads((d / "kvplan.lock").read_text())
    return doc


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
weird_text = st.sampled_from(
    [
        "NaN",
        "-Infinity",
        "1" * 5000,
        "[" * 10_000,
        '{"a":' * 10_000,
        "\ufeff{}",
        "",
        '{"schema_version": true, "configs": {}}',
        '{"schema_version": 1.5, "configs": {}}',
    ]
)


def check_entries(entries: dict[str, Figures]) -> None:
    for f in entries.values():
        for name, v in vars(f).items():
            if name == "concurrency":
                assert all(isinstance(n, int) and not isinstance(n, bool) for n in v.values())
            elif isinstance(v, int) and not isinstance(v, bool):
                assert -MAX_GPU_BYTES <= v <= MAX_GPU_BYTES
        assert 0 <= f.pool_tokens <= MAX_TOKENS and f.dcp >= 1 and f.rank_page_tokens >= 1


def read(text: str) -> None:
    try:
        check_entries(parse_lock(text, "kvplan.lock"))
    except InputError as e:
        assert "\n" not in str(e) and str(e).startswith("kvplan.lock")


@given(doc=json_values)
def test_random_documents(doc: object) -> None:
    read(json.dumps(doc))


@given(doc=json_values, text=weird_text)
def test_random_documents_as_a_lock(doc: object, text: str) -> None:
    read(json.dumps({"schema_version": 2, "configs": {"prod.yaml": doc}}))
    read(text)


@given(name=st.text(max_size=12), doc=json_values)
def test_config_names_never_break_the_one_line(name: str, doc: object) -> None:
    read(json.dumps({"schema_version": 2, "configs": {name: doc}}))


@given(data=st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutations_of_a_real_lock(real_lock: dict[str, Any], data: st.DataObject) -> None:
    doc = json.loads(json.dumps(real_lock))
    entry = doc["configs"]["prod.yaml"]
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(["entry", "top", "concurrency"]))
        target = {"entry": entry, "top": doc, "concurrency": entry.get("concurrency")}[where]
        if not isinstance(target, dict) or not target:
            continue
        key = data.draw(st.sampled_from(sorted(target)))
        if data.draw(st.booleans()):
            target[key] = data.draw(json_values)
        else:
            del target[key]
    read(json.dumps(doc))


@pytest.mark.parametrize(
    "value",
    ['"abc"', "null", "[1]", "-1", "true", "1.5", "1" * 5000, "1e400", "NaN", "{}", "9" * 30],
)
def test_gate_cli_on_bad_pool_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_lock: Any, value: str
) -> None:
    # every one of these was a traceback or a silent pass before the strict reader
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "base.yaml", tmp_path / "prod.yaml")
    text = json.dumps(real_lock).replace('"pool_tokens": 1278208', f'"pool_tokens": {value}')
    assert text != json.dumps(real_lock)
    (tmp_path / "kvplan.lock").write_text(text)
    r = runner.invoke(app, ["gate", "prod.yaml"])
    assert r.exit_code == 2, (value, r.stdout, r.stderr)
    assert r.stderr.startswith("kvplan: error: kvplan.lock") and len(r.stderr.splitlines()) == 1
    assert "Traceback" not in r.stderr


@given(data=st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_gate_cli_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_lock: dict[str, Any], data: st.DataObject
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "base.yaml", tmp_path / "prod.yaml")
    doc = json.loads(json.dumps(real_lock))
    entry = doc["configs"]["prod.yaml"]
    key = data.draw(st.sampled_from(sorted(entry)))
    entry[key] = data.draw(json_values)
    (tmp_path / "kvplan.lock").write_text(json.dumps(doc))
    r = runner.invoke(app, ["gate", "prod.yaml"])
    assert r.exit_code in (0, 1, 2), (r.exit_code, r.stderr)
    if r.exit_code == 2:
        assert r.stderr.startswith("kvplan: error:") and len(r.stderr.splitlines()) == 1
