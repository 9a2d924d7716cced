"""One rule for every writer (issue 25 item 1): no command replaces a file it reads, whatever the option that
named it and however the output names it (the same name, ``sub/..``, an absolute path, a hard link).

Before: `fit --model m.yaml --emit-deploy m.yaml` exited 0 with the model YAML turned into a deployment, and
`doctor --log L --deploy d.yaml --emit-deploy d.yaml` likewise (each writer passed its own partial list of
inputs to kvplan.fsio). The table below is every writing option of every command against every input option;
`test_every_file_option_is_in_the_table` keeps it complete as options are added.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.cli._app import COMMANDS, build_command
from tests.plan.test_fit_trace import SMALL, write_trace

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "logs" / "sglang-0.5.23-glm53-match.log"
MODEL = ROOT / "kvplan" / "configs" / "models" / "glm-5.3.yaml"
DEPLOY = ROOT / "kvplan" / "configs" / "deployments" / "glm-5.3-8xh200-sglang.yaml"
SNAPSHOT = ROOT / "tests" / "data" / "hf" / "llama-3.1-8b"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})


def _model(d: Path) -> Path:
    return Path(shutil.copy(MODEL, d / "m.yaml"))


def _deploy(d: Path) -> Path:
    return Path(shutil.copy(DEPLOY, d / "d.yaml"))


def _deploy_naming_model(d: Path) -> tuple[Path, Path]:
    """A deployment whose `model:` is a YAML file beside it: the model file is an input of the command too."""
    _model(d)
    text = DEPLOY.read_text().replace("model: glm-5.3\n", "model: ./m.yaml\n")
    (d / "dm.yaml").write_text(text)
    return d / "dm.yaml", d / "m.yaml"


def _trace(d: Path) -> Path:
    return write_trace(d / "t.jsonl", SMALL)


def _mooncake(d: Path) -> Path:
    (d / "mc.jsonl").write_text('{"timestamp": 0, "input_length": 1024, "output_length": 16, "hash_ids": [1, 2]}\n')
    return d / "mc.jsonl"


# (command, writing option, input option) -> builds the files in the folder and returns (argv, the input file)
Case = Callable[[Path], tuple[list[str], Path]]
FIT = ["fit", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off", "--require-ctx", "128K"]
PREFIX = ["prefix", "--ctx", "128K", "--hit", "64K", "--sweep", "2"]
SIM = ["--trace-format", "mooncake", "--sweep", "1e5..1e6", "--points", "2"]


def _dm(build: Callable[[Path, Path], list[str]]) -> Case:
    def case(d: Path) -> tuple[list[str], Path]:
        dep, model = _deploy_naming_model(d)
        return build(dep, model), model

    return case


CASES: dict[tuple[str, str, str], Case] = {
    ("fit", "--emit-deploy", "--model"): lambda d: ([*FIT, "--model", str(_model(d))], d / "m.yaml"),
    ("fit", "--emit-deploy", "--model's snapshot"): lambda d: (
        [*FIT, "--model", str(Path(shutil.copytree(SNAPSHOT, d / "snap")))], d / "snap" / "config.json"),
    ("fit", "--emit-deploy", "--trace"): lambda d: (
        [*FIT, "--model", "glm-5.3", "--trace", str(_trace(d))], d / "t.jsonl"),
    ("fit", "--plot", "--model"): lambda d: ([*FIT, "--model", str(_model(d))], d / "m.yaml"),
    ("fit", "--plot", "--trace"): lambda d: ([*FIT, "--model", "glm-5.3", "--trace", str(_trace(d))], d / "t.jsonl"),
    ("doctor", "--emit-deploy", "--log"): lambda d: (
        ["doctor", "--log", str(shutil.copy(LOG, d / "s.log"))], d / "s.log"),
    ("doctor", "--emit-deploy", "--deploy"): lambda d: (["doctor", "--log", str(LOG), "--deploy", str(_deploy(d))],
                                                        d / "d.yaml"),
    ("doctor", "--emit-deploy", "--model"): lambda d: (["doctor", "--log", str(LOG), "--model", str(_model(d))],
                                                       d / "m.yaml"),
    ("doctor", "--emit-deploy", "--deploy's model"): _dm(lambda dep, m: ["doctor", "--log", str(LOG), "--deploy",
                                                                          str(dep)]),
    ("probe", "--emit-deploy", "--deploy"): lambda d: (["probe", "--deploy", str(_deploy(d))], d / "d.yaml"),
    ("prefix", "--plot", "--model"): lambda d: ([*PREFIX, "--model", str(_model(d))], d / "m.yaml"),
    ("prefix", "--plot", "--deploy"): lambda d: ([*PREFIX, "--deploy", str(_deploy(d))], d / "d.yaml"),
    ("prefix", "--plot", "--deploy's model"): _dm(lambda dep, m: [*PREFIX, "--deploy", str(dep)]),
    ("simulate", "--plot", "TRACE"): lambda d: (["simulate", str(_mooncake(d)), *SIM], d / "mc.jsonl"),
    ("simulate", "--plot", "--deploy"): lambda d: (
        ["simulate", str(_mooncake(d)), *SIM, "--deploy", str(_deploy(d))], d / "d.yaml"),
    ("simulate", "--plot", "--model"): lambda d: (
        ["simulate", str(_mooncake(d)), *SIM, "--semantics", "sglang", "--model", str(_model(d))], d / "m.yaml"),
    ("simulate", "--plot", "--deploy's model"): _dm(lambda dep, m: ["simulate", str(_mooncake(dep.parent)), *SIM,
                                                                     "--deploy", str(dep)]),
    ("lock", "--lock", "CONFIG"): lambda d: (["lock", str(_deploy(d))], d / "d.yaml"),
    ("lock", "--lock", "CONFIG's model"): _dm(lambda dep, m: ["lock", str(dep)]),
}  # fmt: skip

WRITERS = {"--emit-deploy", "--plot", "--lock"}
"""Options that name a file a command writes (gate's and diff's --lock and configs are read only)."""
INPUTS = {"--model", "--deploy", "--log", "--trace", "trace", "configs", "--lock"}
"""Options and arguments that name a file a command reads."""


def _file_params(name: str) -> list[tuple[str, str]]:
    """(command, option) for each parameter that takes a path or a model / deployment reference."""
    cmd = build_command(name)
    out = []
    for c in list(cmd.commands.values()) if hasattr(cmd, "commands") else [cmd]:
        for p in c.params:
            if "Path" in type(p.type).__name__ or p.name in ("model", "deploy", "configs", "trace"):
                out.append((name, max(p.opts, key=len) if p.opts[0].startswith("-") else p.name))
    return out


READ_ONLY = {"admit", "budget", "workspace", "transfer", "gate", "diff", "validate", "perf"}
"""Commands that write nothing: their file options are all inputs."""
OPTION = {
    "TRACE": "trace",
    "CONFIG": "configs",
    "--deploy's model": "--deploy",
    "CONFIG's model": "configs",
    "--model's snapshot": "--model",
}


def test_every_file_option_is_in_the_table() -> None:
    """A new option that names a file is classified, and every writer has a case against each of its inputs."""
    seen = [x for name in COMMANDS for x in _file_params(name)]
    assert not [x for x in seen if x[1] not in WRITERS | INPUTS], "classify the new option as a writer or an input"
    for cmd in {c for c, _ in seen} - READ_ONLY:
        outputs = {o for c, o in seen if c == cmd and o in WRITERS}
        inputs = {o for c, o in seen if c == cmd and o in INPUTS and (cmd, o) != ("lock", "--lock")}
        assert outputs, f"{cmd} writes nothing? add it to READ_ONLY"
        for w in outputs:
            covered = {OPTION.get(i, i) for c, o, i in CASES if (c, o) == (cmd, w)}
            assert inputs <= covered, f"{cmd} {w}: no case against {sorted(inputs - covered)}"
    for name in READ_ONLY:
        assert not [o for c, o in seen if c == name and o in WRITERS - {"--lock"}], f"{name} writes now"


SPELLINGS: dict[str, Callable[[Path], str]] = {
    "same name": str,
    "sub/..": lambda p: str(_sub(p.parent) / ".." / p.name),
    "absolute": lambda p: os.path.abspath(p),
    "hard link": lambda p: str(_hard_link(p)),
}


def _sub(folder: Path) -> Path:
    (folder / "sub").mkdir(exist_ok=True)
    return folder / "sub"


def _hard_link(p: Path) -> Path:
    link = p.with_name("hard-" + p.name)
    os.link(p, link)
    return link


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("key", list(CASES), ids=["|".join(k) for k in CASES])
def test_no_writer_replaces_an_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: tuple[str, str, str], spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    argv, target = CASES[key](tmp_path)
    argv = [a[len(str(tmp_path)) + 1 :] if a.startswith(f"{tmp_path}/") else a for a in argv]  # m.yaml, not /…/m.yaml
    before = _digest(target)
    out = SPELLINGS[spelling](target)
    r: Result = runner.invoke(app, [*argv, key[1], out])
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr.startswith(f"kvplan: error: {key[1]} ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert "which this command reads" in r.stderr, r.stderr
    assert _digest(target) == before  # byte-identical afterwards
    assert not [x for x in tmp_path.iterdir() if x.name.endswith(".tmp")]


def test_two_outputs_of_one_command_are_refused_as_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, [*FIT, "--model", "glm-5.3", "--emit-deploy", "x.yaml", "--plot", "./x.yaml"])
    assert r.exit_code == 2 and "--emit-deploy writes the same file" in r.stderr, r.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_lock_still_merges_into_its_own_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock's own old version, read by its own name, is the merge, not an input to protect."""
    monkeypatch.chdir(tmp_path)
    _deploy(tmp_path)
    shutil.copy(DEPLOY, tmp_path / "e.yaml")
    assert runner.invoke(app, ["lock", "d.yaml"]).exit_code == 0
    r = runner.invoke(app, ["lock", "e.yaml"])
    assert r.exit_code == 0, r.stderr
    assert '"d.yaml"' in (tmp_path / "kvplan.lock").read_text() and '"e.yaml"' in (tmp_path / "kvplan.lock").read_text()
