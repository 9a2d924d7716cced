"""Bad input: exit 2 and ONE line on stderr, `kvplan: error: FILE:LINE: KEY: message`, never a traceback.

Every fixture is written into ``tmp_path``; line numbers are computed from the fixture text, so the
assertions check that kvplan points at the offending line, not at a number copied from its output.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app

# KVPLAN_FORMAT set in the caller's environment must not change what these tests see.
runner = CliRunner(env={"KVPLAN_FORMAT": None})

# The structure of kvplan/configs/deployments/glm-5.3-8xh200-sglang.yaml, with the built-in model.
DEPLOY = """\
schema_version: 1
name: test-glm-5.3-sglang
description: a copy of the built-in SGLang preset
model: glm-5.3
engine: sglang
engine_version: "0.5.23"
gpu: h200
gpus_per_node: 8
nodes: 1
tp: 8
dcp: 1
kv_cache_dtype: fp8_e4m3
page_size: 64
"""

# A Hugging Face config.json with what kvplan needs (KV fields only, no parameter groups).
HF_CONFIG = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "num_hidden_layers": 78,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "index_topk": 2048,
    "index_head_dim": 128,
    "index_n_heads": 32,
    "max_position_embeddings": 1048576,
}


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def admit(*args: str | Path) -> Result:
    return invoke("admit", "--ctx", "128K", *args)


def error_line(result: Result) -> str:
    """The contract for bad input; returns the one error line for further checks."""
    detail = f"exit {result.exit_code}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    # An exception escaping the command shows up here under CliRunner (a traceback in a real shell).
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{result.exception!r}\n{detail}"
    assert result.exit_code == 2, detail
    assert result.stdout == "", detail
    assert "Traceback" not in result.stdout + result.stderr, detail
    assert result.stderr.endswith("\n"), detail
    lines = result.stderr.splitlines()
    assert len(lines) == 1, detail
    assert lines[0].startswith("kvplan: error: "), detail
    return lines[0]


def line_of(text: str, needle: str) -> int:
    """1-based line of the only line of text that contains needle."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def edited(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def preset_model_text() -> str:
    return (resources.files("kvplan") / "configs" / "models" / "glm-5.3.yaml").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the fixtures themselves are fine


def test_fixture_deployment_is_accepted(tmp_path: Path) -> None:
    result = admit("--deploy", write(tmp_path, "dep.yaml", DEPLOY))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""


def test_fixture_model_yaml_is_accepted(tmp_path: Path) -> None:
    result = invoke("models", "show", write(tmp_path, "model.yaml", preset_model_text()))
    assert result.exit_code == 0, result.stderr
    assert "78" in result.stdout


def test_fixture_hf_config_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "glm/config.json", json.dumps(HF_CONFIG, indent=2))
    result = invoke("models", "show", path)
    assert result.exit_code == 0, result.stderr


# --------------------------------------------------------------------------- malformed files


def test_yaml_bad_indent_names_the_line(tmp_path: Path) -> None:
    text = edited(DEPLOY, "gpu: h200\n", "  gpu: h200\n")  # indented under a scalar
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, 'gpu: h200')}: " in msg
    assert "not valid YAML" in msg


def test_yaml_unclosed_bracket_names_the_line(tmp_path: Path) -> None:
    text = edited(DEPLOY, "tp: 8\n", "tp: [8\n")
    opened = line_of(text, "tp: [8")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    # The bracket opens on `opened`; the parser notices on the next line (the next key, no ']').
    m = re.search(r"dep\.yaml:(\d+): ", msg)
    assert m, msg
    assert int(m.group(1)) in (opened, opened + 1), msg
    assert "not valid YAML" in msg


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    text = '{\n  "num_hidden_layers": 78,\n  "kv_lora_rank": 512\n  "qk_rope_head_dim": 64\n}\n'
    # the missing ',' after line 3 is found at the next token, on line 4
    msg = error_line(invoke("models", "show", write(tmp_path, "x/config.json", text)))
    assert "config.json:4: " in msg
    assert "not valid JSON" in msg


def test_empty_file(tmp_path: Path) -> None:
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", "# nothing\n")))
    assert "dep.yaml" in msg and "empty" in msg


def test_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", "- tp: 8\n- dcp: 1\n")))
    assert "dep.yaml:1: " in msg and "mapping" in msg


# --------------------------------------------------------------------------- deployment YAML keys and values


def test_unknown_deployment_key_suggests_the_close_one(tmp_path: Path) -> None:
    text = edited(DEPLOY, "dcp: 1\n", "dcpp: 8\n")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, 'dcpp')}: dcpp: unknown key" in msg
    assert "did you mean 'dcp'" in msg


def test_engine_flag_name_in_yaml_is_read_as_kvplans_knob(tmp_path: Path) -> None:
    # issue 9 item 22: engine spellings are accepted in YAML as with --set (was: exit 2 "write 'tp'")
    text = edited(DEPLOY, "tp: 8\n", "tensor_parallel_size: 8\n--max-model-len: 512K\n")
    result = admit("--deploy", write(tmp_path, "dep.yaml", text), "-f", "json")
    assert result.exit_code in (0, 1), result.stderr
    knobs = {k["name"]: k for k in json.loads(result.stdout)["plan"]["knobs"]}
    assert knobs["context_length"]["value"] == 512 * 1024  # max_model_len 512K = 524,288, set by the file
    assert not knobs["context_length"]["defaulted"]


def test_engine_spelling_and_kvplan_name_together_is_a_duplicate(tmp_path: Path) -> None:
    text = DEPLOY + "tensor_parallel_size: 4\n"
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, 'tensor_parallel_size')}: tp: given twice" in msg


def test_duplicate_key(tmp_path: Path) -> None:
    text = DEPLOY + "tp: 4\n"
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, 'tp: 4')}: tp: duplicate key" in msg


def with_line(text: str, line: str) -> str:
    """text with `key: ...` replaced by line (same key), or line appended if the key is absent."""
    key = line.split(":", 1)[0]
    rows = text.splitlines(keepends=True)
    hits = [i for i, row in enumerate(rows) if row.startswith(key + ":")]
    if not hits:
        return text + line + "\n"
    rows[hits[0]] = line + "\n"
    return "".join(rows)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("tp: eight", "expected an integer"),
        ("tp: 0", ">= 1"),
        ("tp: -8", ">= 1"),
        ("tp: 8.0", "expected an integer"),
        ("weights_per_gpu: -5GiB", "-5GiB"),
        ("weights_per_gpu: 0GiB", "at least 1 MiB"),  # limits.MIN_MEMORY_KNOB_BYTES: a unit slip
        ("weights_per_gpu: 94", "no unit"),
        ("weights_per_gpu: '94'", "no unit"),
        ("weights_per_gpu: 94 gibibytes", "unit"),
        ("mem_fraction_static: 1.5", "(0, 1]"),
        ("context_length: 0", "positive"),
        ("engine: trtllm", "sglang"),
        ("gpu: h900", "unknown GPU"),
        ('engine_version: "0.3"', "not modelled"),
        ("kv_cache_dtype: fp4", "'fp4'"),
    ],
)
def test_bad_deployment_value_names_key_and_line(tmp_path: Path, line: str, words: str) -> None:
    key = line.split(":", 1)[0]
    text = with_line(DEPLOY, line)
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, line)}: {key}: " in msg
    assert words in msg


def test_missing_required_deployment_key(tmp_path: Path) -> None:
    # only the model is required (issue 9 item 22: engine, GPU, tp ... are defaulted and said so)
    text = edited(DEPLOY, "model: glm-5.3\n", "")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert "dep.yaml:1: model: missing" in msg  # the line of the enclosing mapping


def test_dcp_must_divide_tp_in_a_file(tmp_path: Path) -> None:
    text = edited(DEPLOY, "dcp: 1\n", "dcp: 3\n")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert f"dep.yaml:{line_of(text, 'dcp: 3')}: dcp: " in msg
    assert "must divide tp 8" in msg


def test_deployment_schema_from_the_future(tmp_path: Path) -> None:
    text = edited(DEPLOY, "schema_version: 1\n", "schema_version: 99\n")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    assert "dep.yaml:1: schema_version: " in msg
    assert "newer kvplan" in msg


# --------------------------------------------------------------------------- model YAML and HF config.json


@pytest.fixture(params=["models-show", "admit"])
def model_cmd(request: pytest.FixtureRequest) -> list[str]:
    """The two ways a model file is read: `models show FILE` and `admit --model FILE`."""
    return ["models", "show"] if request.param == "models-show" else ["admit", "--ctx", "128K", "--model"]


def test_unknown_key_inside_model_config(tmp_path: Path, model_cmd: list[str]) -> None:
    text = edited(preset_model_text(), "  kv_lora_rank: 512\n", "  kv_lora_rank: 512\n  kv_lora_rnk: 512\n")
    msg = error_line(invoke(*model_cmd, write(tmp_path, "model.yaml", text)))
    assert f"model.yaml:{line_of(text, 'kv_lora_rnk')}: config.kv_lora_rnk: unknown key" in msg
    assert "did you mean 'kv_lora_rank'" in msg


def test_indexer_types_of_the_wrong_length(tmp_path: Path, model_cmd: list[str]) -> None:
    text = preset_model_text()
    last = "      shared, shared, full, shared, shared, shared\n"  # the last row of indexer_types
    assert text.count(last) == 1
    text = text.replace(last, "      shared, shared, full, shared, shared\n")
    msg = error_line(invoke(*model_cmd, write(tmp_path, "model.yaml", text)))
    assert f"model.yaml:{line_of(text, 'indexer_types:')}: config.indexer_types: " in msg
    assert "77 entries for 78 layers" in msg


def test_bad_indexer_types_entry(tmp_path: Path) -> None:
    text = edited(preset_model_text(), "      full, full, full,", "      full, fulll, full,")
    msg = error_line(invoke("models", "show", write(tmp_path, "model.yaml", text)))
    assert "model.yaml:" in msg and "config.indexer_types[1]: " in msg and "'fulll'" in msg


def test_model_schema_from_the_future(tmp_path: Path, model_cmd: list[str]) -> None:
    text = edited(preset_model_text(), "schema_version: 1\n", "schema_version: 99\n")
    msg = error_line(invoke(*model_cmd, write(tmp_path, "model.yaml", text)))
    assert "model.yaml:1: schema_version: " in msg
    assert "newer kvplan" in msg


def test_model_yaml_without_config_section(tmp_path: Path) -> None:
    text = "schema_version: 1\nname: x\n"
    msg = error_line(invoke("models", "show", write(tmp_path, "model.yaml", text)))
    assert "model.yaml:1: config: missing" in msg


def test_hf_config_without_num_hidden_layers(tmp_path: Path, model_cmd: list[str]) -> None:
    cfg = {k: v for k, v in HF_CONFIG.items() if k != "num_hidden_layers"}
    path = write(tmp_path, "glm/config.json", json.dumps(cfg, indent=2))
    msg = error_line(invoke(*model_cmd, path))
    # a missing key is located at its enclosing mapping: the '{' on line 1
    assert "config.json:1: num_hidden_layers: missing (required)" in msg


def test_hf_config_wrong_type_names_its_line(tmp_path: Path) -> None:
    text = json.dumps({**HF_CONFIG, "kv_lora_rank": "512x"}, indent=2)
    msg = error_line(invoke("models", "show", write(tmp_path, "glm/config.json", text)))
    assert f"config.json:{line_of(text, 'kv_lora_rank')}: kv_lora_rank: expected a JSON number" in msg


# --------------------------------------------------------------------------- presets and paths


def test_unknown_model_preset() -> None:
    msg = error_line(admit("--model", "nosuch"))
    assert "unknown model preset 'nosuch'" in msg
    assert "glm-5.3" in msg  # lists the choices


def test_unknown_deployment_preset() -> None:
    msg = error_line(admit("--deploy", "nosuch"))
    assert "unknown deployment preset 'nosuch'" in msg
    assert "glm-5.3-8xh200-sglang" in msg


def test_unknown_preset_in_show() -> None:
    assert "nosuch" in error_line(invoke("models", "show", "nosuch"))
    assert "nosuch" in error_line(invoke("deployments", "show", "nosuch"))


@pytest.mark.parametrize("opt", ["--deploy", "--model"])
def test_missing_file(opt: str) -> None:
    msg = error_line(admit(opt, "/nonexistent/x.yaml"))
    assert "/nonexistent/x.yaml" in msg and "no such file" in msg


@pytest.mark.parametrize("opt", ["--deploy", "--model"])
def test_directory_given_as_a_file(tmp_path: Path, opt: str) -> None:
    folder = tmp_path / "conf.yaml"
    folder.mkdir()
    msg = error_line(admit(opt, folder))
    assert "conf.yaml" in msg and "directory" in msg


def test_deployment_pointing_at_a_missing_model_file(tmp_path: Path) -> None:
    text = edited(DEPLOY, "model: glm-5.3\n", "model: models/missing.yaml\n")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text)))
    # relative to the deployment file's folder
    assert str(tmp_path / "models" / "missing.yaml") in msg and "no such file" in msg


# --------------------------------------------------------------------------- --set


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("weights_per_gpu=94", ["--set: weights_per_gpu: ", "no unit", "94GiB"]),
        ("tp=abc", ["--set: tp: ", "expected an integer", "'abc'"]),
        ("tp=0", ["--set: tp: ", ">= 1"]),
        ("nonsense=1", ["--set: nonsense: unknown key"]),
        ("dcpp=8", ["--set: dcpp: unknown key", "did you mean 'dcp'"]),
        ("novalue", ["--set 'novalue'", "KEY=VALUE"]),
        ("tp=", ["--set 'tp='", "empty value"]),
        ("dcp=3", ["--set: dcp: ", "dcp 3 must divide tp 8"]),
        ("kv_cache_dtype=fp4", ["--set: kv_cache_dtype: ", "'fp4'"]),
    ],
)
def test_bad_set(item: str, words: list[str]) -> None:
    msg = error_line(admit("--set", item))
    for w in words:
        assert w in msg


def test_set_given_twice_through_an_alias() -> None:
    msg = error_line(admit("--set", "tp=8", "--set", "tp_size=8"))
    assert "--set tp given twice" in msg


def test_set_engine_version_not_modelled() -> None:
    msg = error_line(admit("--set", "engine=vllm", "--set", "engine_version=0.1"))
    assert "--set: engine_version: " in msg


def test_set_engine_version_message_lists_the_modelled_versions() -> None:
    msg = error_line(admit("--set", "engine=vllm", "--set", "engine_version=0.1"))
    assert "not modelled" in msg and "0.33.0" in msg


def test_set_engine_version_not_modelled_as_a_string() -> None:
    msg = error_line(admit("--set", "engine_version=0.3.0"))
    assert "--set: engine_version: sglang 0.3.0 is not modelled" in msg


def test_layout_error_from_the_file_names_the_file_even_with_an_unrelated_set(tmp_path: Path) -> None:
    text = edited(DEPLOY, "dcp: 1\n", "dcp: 3\n")
    msg = error_line(admit("--deploy", write(tmp_path, "dep.yaml", text), "--set", "page_size=64"))
    assert f"dep.yaml:{line_of(text, 'dcp: 3')}: dcp: " in msg


# --------------------------------------------------------------------------- --ctx, --gen, --concurrent, --pool-tokens


@pytest.mark.parametrize(
    ("ctx", "words"),
    [
        ("0", "--ctx must be positive"),
        ("-5", "'-5'"),
        ("abc", "'abc'"),
        ("1.5", "not a whole number"),
        ("1.5X", "'1.5X'"),
        ("", "''"),
    ],
)
def test_bad_ctx(ctx: str, words: str) -> None:
    assert words in error_line(invoke("admit", "--ctx", ctx))


@pytest.mark.parametrize(
    ("option", "args"),
    [
        ("--ctx", ["--ctx", "abc"]),
        ("--ctx", ["--ctx", "-5"]),
        ("--ctx", ["--ctx", "1.5"]),
        ("--gen", ["--ctx", "128K", "--gen", "abc"]),
        ("--pool-tokens", ["--ctx", "128K", "--pool-tokens", "abc"]),
    ],
    ids=["ctx-abc", "ctx-negative", "ctx-fraction", "gen-abc", "pool-tokens-abc"],
)
def test_bad_token_option_is_named(option: str, args: list[str]) -> None:
    assert option in error_line(invoke("admit", *args))


def test_ctx_1_5m_is_a_whole_number_and_accepted() -> None:
    # 1.5M = 1.5 × 1,048,576 = 1,572,864 tokens exactly: valid input. It is longer than the default
    # deployment's 1,048,576-token context, so the answer is "rejected" (1), not "bad input" (2).
    result = invoke("admit", "--ctx", "1.5M", "--format", "json")
    assert result.exit_code == 1, result.stderr
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert data["request"]["ctx_tokens"] == 1_572_864
    assert data["binding"] == "context length"


def test_gen_negative() -> None:
    assert "'-1'" in error_line(invoke("admit", "--ctx", "128K", "--gen", "-1"))


def test_concurrent_zero() -> None:
    assert "--concurrent must be positive, got 0" in error_line(admit("--concurrent", "0"))


def test_budget_bad_ctx_list() -> None:
    assert "--ctx: token count '8Q'" in error_line(invoke("budget", "--ctx", "8K,8Q"))
    assert "empty list" in error_line(invoke("budget", "--ctx", ","))


# Errors click/typer raise while parsing options go through the same one-line contract.
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["admit", "--ctx", "128K", "--concurrent", "abc"], "--concurrent"),
        (["admit"], "--ctx"),
        (["admit", "--ctx", "128K", "--format", "bogus"], "bogus"),
        (["admit", "--ctx", "128K", "--no-such-option"], "--no-such-option"),
        (["nosuchcommand"], "nosuchcommand"),
    ],
    ids=["concurrent-abc", "missing-ctx", "format-bogus", "unknown-option", "unknown-command"],
)
def test_usage_errors_are_one_line(args: list[str], named: str) -> None:
    assert named in error_line(invoke(*args))


# --------------------------------------------------------------------------- YAML that PyYAML refuses to construct


# Scalars PyYAML refuses to construct: once an uncaught traceback with exit 1 ("rejected").
UNCONSTRUCTIBLE = {
    "bad-date": "name: 2024-13-45\n",  # YAML's implicit timestamp; month 13 -> ValueError
    "bad-int-tag": "tp: !!int abc\n",
    "python-tag": "tp: !!python/object:os.system x\n",
    "recursive-alias": "x: &a [*a]\n",
}


def unconstructible(tmp_path: Path, extra: str) -> tuple[Path, str]:
    key = extra.split(":", 1)[0]
    text = "".join(line for line in DEPLOY.splitlines(keepends=True) if not line.startswith(key + ":"))
    text += extra
    return write(tmp_path, "dep.yaml", text), text


@pytest.mark.parametrize("extra", UNCONSTRUCTIBLE.values(), ids=UNCONSTRUCTIBLE.keys())
def test_unconstructible_yaml_is_bad_input(tmp_path: Path, extra: str) -> None:
    path, _ = unconstructible(tmp_path, extra)
    assert "dep.yaml" in error_line(admit("--deploy", path))


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(UNCONSTRUCTIBLE["bad-date"], id="bad-date"),
        pytest.param(UNCONSTRUCTIBLE["bad-int-tag"], id="bad-int-tag"),
        pytest.param(UNCONSTRUCTIBLE["python-tag"], id="python-tag"),
        pytest.param(UNCONSTRUCTIBLE["recursive-alias"], id="recursive-alias"),
    ],
)
def test_unconstructible_yaml_names_the_line(tmp_path: Path, extra: str) -> None:
    path, text = unconstructible(tmp_path, extra)
    msg = error_line(admit("--deploy", path))
    assert f"dep.yaml:{line_of(text, extra.strip())}: " in msg
