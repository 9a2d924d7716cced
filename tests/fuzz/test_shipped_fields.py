"""Fuzz every field of the shipped presets (issue 25 item 7): each model preset's config fields (nested ones and
per-layer list entries included) and each deployment preset's knobs, one field at a time, set to a hostile value.

The contract, checked on every example:
- the reader returns a model or deployment, or raises kvplan's error: one line, naming the file and the key;
- never a silent acceptance of a value outside the stated rule (kvplan.models.validate): a count or width < 1,
  a boolean that is not a boolean, a per-layer list of the wrong length or with an unknown word is refused, and
  the refusal names the mutated key;
- what loads plans under both engines to whole-number pools (ints, >= 0) or an engine's own refusal (one line);
- through the CLI: exit 0/1/2, exit 2 with one stderr line naming the file, never 4, never a traceback.

Bounded: the profile in tests/conftest.py (25 examples a test locally, 60 with CI=1); `pytest tests/fuzz
--fuzz-long` runs 2,000.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.errors import ConfigError, KvplanError
from kvplan.models import validate
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.fuzz.conftest import one_line_error

FUZZ = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
CONFIGS = Path(__file__).resolve().parents[2] / "kvplan" / "configs"
MODELS = sorted(CONFIGS.glob("models/*.yaml"))
DEPLOYS = sorted(CONFIGS.glob("deployments/*.yaml"))
runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "120"})

Path_ = tuple[str | int, ...]


def _fields(value: Any, path: Path_ = ()) -> list[Path_]:
    """Every field path under value: mapping keys and list indexes, the containers themselves included."""
    out: list[Path_] = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _fields(v, (*path, k))
    elif isinstance(value, list) and len(value) <= 128:
        for i, v in enumerate(value):
            out += _fields(v, (*path, i))
    return out


def _set(doc: Any, path: Path_, value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def _get(doc: Any, path: Path_) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _hostile(original: Any) -> st.SearchStrategy[Any]:
    """Values past the rules, and a few edits of the original (a list one short, one long, an unknown word)."""
    plain = st.sampled_from([0, -1, 1, 2, 3, 2**31, 2**70, 1.5, -0.0, "yes", "", "0", "٣", "1M", None, True, False])
    if isinstance(original, list) and original:
        edits = st.sampled_from(
            [original[:-1], [*original, original[-1]], ["weird_attention", *original[1:]], [], [original]]
        )
        return plain | edits
    return plain | st.just([]) | st.just({})


_RULED = {*validate.POSITIVE, *validate.TOKENS, *validate.BOOLEANS, *validate.LAYER_WORDS}
_MODEL_DOCS = {p: yaml.safe_load(p.read_text()) for p in MODELS}


@st.composite
def mutated_model(draw: st.DrawFn) -> tuple[Path, Path_, Any, dict[str, Any]]:
    preset = draw(st.sampled_from(MODELS))
    doc = copy.deepcopy(_MODEL_DOCS[preset])
    every = _fields(doc["config"], ("config",))
    ruled = [p for p in every if len(p) == 2 and p[1] in _RULED] or every
    path = draw(st.sampled_from(every) | st.sampled_from(ruled))  # half the examples on a field with a rule
    original = _get(doc, path)
    breaking = st.sampled_from([0, -1, -(2**40), "yes", 1.5]) | _hostile(original)  # past the rules, mostly
    value = draw(breaking if path in ruled else _hostile(original))
    _set(doc, path, value)
    return preset, path, value, doc


def _violates(path: Path_, value: Any, doc: dict[str, Any]) -> str | None:
    """The validate rule a top-level config value breaks, or None (only rules whose refusal must name the key)."""
    if len(path) != 2 or value is None:
        return None
    key = str(path[1])
    if key in (*validate.POSITIVE, *validate.TOKENS) and isinstance(value, int) and not isinstance(value, bool):
        return "positive" if value < 1 else None
    if key in validate.BOOLEANS and not isinstance(value, bool):
        return "boolean"
    if key in validate.LAYER_WORDS:
        layers = doc["config"].get("num_hidden_layers")
        if isinstance(value, list) and isinstance(layers, int) and len(value) != layers:
            return "layer list length"
    return None


def _sound(plan: Any) -> None:
    for name in ("rows", "usable_pages", "logged_tokens", "available_bytes", "page_tokens"):
        v = getattr(plan, name)
        assert isinstance(v, int) and not isinstance(v, bool), (name, v)
    assert plan.rows >= 0 and plan.usable_pages >= 0 and plan.page_tokens >= 1


@FUZZ
@given(case=mutated_model())
def test_every_model_field(case: tuple[Path, Path_, Any, dict[str, Any]]) -> None:
    preset, path, value, doc = case
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / preset.name
        target.write_text(yaml.safe_dump(doc, allow_unicode=True))
        try:
            arch = load_model(str(target))
        except KvplanError as e:
            assert "\n" not in str(e)
            if isinstance(e, ConfigError):
                assert e.source == str(target) and e.key, e
            rule = _violates(path, value, doc)
            if rule is not None:  # refused for the right key (a key inside it, e.g. layer_types[0], counts)
                assert isinstance(e, ConfigError) and (e.key or "").startswith(".".join(map(str, path))), (rule, e)
            return
        rule = _violates(path, value, doc)
        assert rule is None, f"{preset.name} {path}={value!r} accepted, against the {rule} rule"
        for deploy in ("glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"):
            dep = load_deployment(deploy, ["weights_per_gpu=20GiB"])
            plan = one_line_error(lambda d=dep: plan_pool(arch, d))  # type: ignore[misc]
            if plan is not None:
                _sound(plan)


_DEPLOY_DOCS = {p: yaml.safe_load(p.read_text()) for p in DEPLOYS}


@st.composite
def mutated_deployment(draw: st.DrawFn) -> tuple[Path, Path_, dict[str, Any]]:
    preset = draw(st.sampled_from(DEPLOYS))
    doc = copy.deepcopy(_DEPLOY_DOCS[preset])
    path = draw(st.sampled_from([p for p in _fields(doc) if p[0] not in ("description", "name", "schema_version")]))
    value = draw(
        _hostile(_get(doc, path)) | st.sampled_from(["0.5B", "80GiB", "1000TiB", "٠.٥.٢٣", "0.5.9", "vllm", "fp8"])
    )
    _set(doc, path, value)
    return preset, path, doc


@FUZZ
@given(case=mutated_deployment(), command=st.sampled_from([["admit", "--ctx", "8K"], ["budget", "--ctx", "8K"]]))
def test_every_deployment_field(case: tuple[Path, Path_, dict[str, Any]], command: list[str]) -> None:
    preset, path, doc = case
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / preset.name
        target.write_text(yaml.safe_dump(doc, allow_unicode=True))
        r = runner.invoke(app, [*command, "--deploy", str(target)])
        detail = f"{preset.name} {path}: exit {r.exit_code}\n{r.stderr!r}"
        assert r.exception is None or isinstance(r.exception, SystemExit), detail
        assert r.exit_code in (0, 1, 2), detail
        assert "Traceback" not in r.stdout + r.stderr, detail
        if r.exit_code == 2:
            assert r.stderr.count("\n") == 1 and r.stderr.startswith("kvplan: error: "), detail
        try:
            load_deployment(str(target))
        except ConfigError as e:  # the deployment itself is refused: the line names the file and the key
            assert r.exit_code == 2 and str(target) in r.stderr and e.key, detail
