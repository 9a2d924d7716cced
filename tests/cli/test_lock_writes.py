"""Writes to disk (issue 10, "Data lost"): kvplan/fsio.py and every writer that uses it.

The lock, `probe --emit-deploy` and `--plot` write through one module: a temporary file in the target's
folder, fsync, os.replace, fsync of the folder. Refused: a symlink, a directory, a non-regular file, a file the
same command reads. A `kvplan lock` killed at any moment leaves the old lock or the new one; two runs on one
lock serialize on `<lock>.lck`, the lock holds both entries, and the sidecar is gone when they end (issue 29: a
config repository's `git add -A` committed it).

Numbers (tests/cli/test_gate.py derives them): base.yaml locks 1,278,208 pool tokens, indexer39.yaml 1,168,256.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner, Result

from kvplan import fsio
from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.fsio import atomic_file, check_target, exclusive, sidecar, write_atomic
from kvplan.plan.gate import parse_lock

DATA = Path(__file__).parents[1] / "data" / "gate"
ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})
BASE_TOKENS, IDX39_TOKENS = 1_278_208, 1_168_256


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_error(r: Result, code: int, needle: str) -> None:
    assert r.exit_code == code, r.stdout + r.stderr
    assert r.stderr.startswith("kvplan: error:") and len(r.stderr.splitlines()) == 1, r.stderr
    assert needle in r.stderr, r.stderr


# --------------------------------------------------------------------------- fsio on its own


def test_write_atomic_replaces_and_keeps_the_mode(tmp_path: Path) -> None:
    p = tmp_path / "out.txt"
    p.write_text("old")
    p.chmod(0o640)
    write_atomic(p, "new", "--out")
    assert p.read_text() == "new"
    assert p.stat().st_mode & 0o777 == 0o640  # mkstemp's 0600 is not what the user gets
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]  # no temporary left


def test_a_failed_write_keeps_the_old_file_whole(tmp_path: Path) -> None:
    p = tmp_path / "out.txt"
    p.write_text("old contents")
    with pytest.raises(RuntimeError), atomic_file(p, "--out") as f:
        f.write(b"half of the new")
        raise RuntimeError("the writer failed half way")
    assert p.read_text() == "old contents"
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "directory", "device", "missing folder"])
def test_refused_targets(tmp_path: Path, kind: str) -> None:
    real = tmp_path / "real.txt"
    real.write_text("keep me")
    target = tmp_path / "t"
    if kind == "symlink":
        target.symlink_to(real)
    elif kind == "dangling symlink":
        target.symlink_to(tmp_path / "nowhere")
    elif kind == "directory":
        target.mkdir()
    elif kind == "device":
        target = Path("/dev/null")
    else:
        target = tmp_path / "no" / "such" / "t"
    with pytest.raises(InputError) as e:
        write_atomic(target, "x", "--out")
    needle = {"symlink": "symlink", "dangling symlink": "symlink", "directory": "directory", "device": "regular"}
    assert needle.get(kind, "does not exist") in str(e.value)
    assert real.read_text() == "keep me"


def test_refuses_a_file_the_command_reads_by_any_name(tmp_path: Path) -> None:
    cfg = tmp_path / "a.yaml"
    cfg.write_text("engine: sglang\n")
    (tmp_path / "hard.yaml").hardlink_to(cfg)
    for name in ("a.yaml", "hard.yaml"):
        with pytest.raises(InputError, match="which this command reads"):
            check_target(tmp_path / name, "--lock", [cfg])
    assert cfg.read_text() == "engine: sglang\n"


def test_exclusive_times_out_with_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the wait runs on a counted clock (no wall-clock assert): fsio.exclusive polls every 0.02 s until its
    # deadline, so a 0.2 s timeout gives up after waiting 0.2 s, in 10 polls (11 at most for float steps)
    clock = [0.0]
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        clock[0] += s

    monkeypatch.setattr(fsio, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep))
    p = tmp_path / "kvplan.lock"
    with exclusive(p, "--lock"):
        with pytest.raises(InputError, match="another kvplan"), exclusive(p, "--lock", timeout_s=0.2):
            pass
        assert clock[0] >= 0.2 and len(naps) in (10, 11) and set(naps) == {0.02}
    with exclusive(p, "--lock", timeout_s=0.2):  # released on exit
        assert sidecar(p).exists()
    assert not sidecar(p).exists()  # issue 29: removed by its holder (this test asserted it stayed, before)


_COUNTER = """
import sys, time
from pathlib import Path
from kvplan.fsio import exclusive
p = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with exclusive(p, "--lock"):
        n = int(p.read_text())
        time.sleep(0.001)
        p.write_text(str(n + 1))
"""


def test_exclusive_without_a_sidecar_left_still_serializes(tmp_path: Path) -> None:
    # the holder unlinks the sidecar before it lets go: a waiter that got the flock of the unlinked file must
    # start over, or a third run locking the fresh file would hold it at the same time (lost increments)
    p = tmp_path / "kvplan.lock"
    p.write_text("0")
    runs, each = 5, 30
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _COUNTER, str(p), str(each)], env=env) for _ in range(runs)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    assert int(p.read_text()) == runs * each
    assert sorted(x.name for x in tmp_path.iterdir()) == ["kvplan.lock"]


def test_a_sidecar_a_killed_run_left_is_taken_and_removed(tmp_path: Path) -> None:
    p = tmp_path / "kvplan.lock"
    sidecar(p).write_text("")  # what a SIGKILLed holder leaves
    with exclusive(p, "--lock", timeout_s=0.2):
        pass
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the writers


def test_lock_refuses_to_overwrite_its_own_config(repo: Path) -> None:
    before = (repo / "base.yaml").read_bytes()
    one_error(run("lock", "base.yaml", "--lock", "base.yaml"), 2, "which this command reads")
    assert (repo / "base.yaml").read_bytes() == before


def test_lock_refuses_to_overwrite_the_model_file_a_config_names(repo: Path) -> None:
    # indexer39.yaml names the model glm-5.3-39-indexer-layers.yaml, which the command reads too
    model = repo / "glm-5.3-39-indexer-layers.yaml"
    before = model.read_bytes()
    one_error(run("lock", "indexer39.yaml", "--lock", str(model)), 2, "which this command reads")
    assert model.read_bytes() == before


@pytest.mark.parametrize("target", ["/dev/null", "folder", "link"])
def test_lock_refuses_non_regular_targets(repo: Path, target: str) -> None:
    (repo / "folder").mkdir()
    (repo / "link").symlink_to(repo / "base.yaml")
    r = run("lock", "bf16.yaml", "--lock", target)
    one_error(r, 2, "--lock")
    assert (repo / "base.yaml").read_text().startswith("schema_version: 1")


def test_lock_will_not_replace_a_file_that_is_not_a_lock(repo: Path) -> None:
    (repo / "notes.txt").write_text("my notes\n")
    one_error(run("lock", "base.yaml", "--lock", "notes.txt", "--prune"), 2, "fix or delete it first")
    assert (repo / "notes.txt").read_text() == "my notes\n"


def test_emit_deploy_refuses_a_symlink_before_probing(repo: Path) -> None:
    (repo / "here.yaml").symlink_to(repo / "base.yaml")
    one_error(run("probe", "--emit-deploy", "here.yaml"), 2, "symlink")  # no NVML needed to refuse
    assert (repo / "base.yaml").read_text().startswith("schema_version: 1")


def test_emit_deploy_refuses_its_own_deploy_file(repo: Path) -> None:
    one_error(run("probe", "--emit-deploy", "base.yaml", "--deploy", "base.yaml"), 2, "which this command reads")


def test_plot_keeps_the_old_file_on_an_unknown_format(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kvplan.render.plot import plot_prefix_sweep

    p = tmp_path / "curve.xyz"
    p.write_text("old")
    with pytest.raises(InputError, match=r"cannot write \.xyz"):
        plot_prefix_sweep((), p)
    assert p.read_text() == "old"


def test_plot_refuses_a_symlink(tmp_path: Path) -> None:
    from kvplan.render.plot import plot_prefix_sweep

    real = tmp_path / "real.png"
    real.write_text("old")
    (tmp_path / "link.png").symlink_to(real)
    with pytest.raises(InputError, match="symlink"):
        plot_prefix_sweep((), tmp_path / "link.png")
    assert real.read_text() == "old"


def test_plot_without_matplotlib_is_exit_2_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = run("prefix", "--ctx", "128K", "--hit", "64K", "--sweep", "4", "--plot", "x.png")
    one_error(r, 2, "pip install 'kvplan-llm[plot]'")


# --------------------------------------------------------------------------- killed and concurrent runs


def _kvplan(*args: str, cwd: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_ACTIONS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "kvplan", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _pool(lock: Path, key: str) -> int:
    return parse_lock(lock.read_text(), str(lock))[key].pool_tokens


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_lock_leaves_the_old_lock_or_the_new_one(repo: Path, sig: signal.Signals) -> None:
    shutil.copy(repo / "base.yaml", repo / "prod.yaml")
    assert run("lock", "prod.yaml").exit_code == 0
    old = (repo / "kvplan.lock").read_bytes()
    shutil.copy(repo / "indexer39.yaml", repo / "prod.yaml")
    t0 = time.monotonic()
    p = _kvplan("lock", "prod.yaml", cwd=repo)
    p.communicate(timeout=60)
    full = time.monotonic() - t0  # one whole run; kills land anywhere in it
    assert p.returncode == 0
    new = (repo / "kvplan.lock").read_bytes()
    assert _pool(repo / "kvplan.lock", "prod.yaml") == IDX39_TOKENS
    rng = random.Random(20261201)
    seen = set()
    for _ in range(20):
        (repo / "kvplan.lock").write_bytes(old)
        p = _kvplan("lock", "prod.yaml", cwd=repo)
        time.sleep(rng.uniform(0.0, full))
        p.send_signal(sig)
        p.communicate(timeout=60)  # (a SIGINT during interpreter start-up is Python's own traceback)
        data = (repo / "kvplan.lock").read_bytes()
        assert data in (old, new)  # byte for byte one of the two: never a mix
        seen.add(data == new)
        if sig is signal.SIGINT:  # Python unwinds: the temporary file is removed
            assert not [x for x in repo.iterdir() if x.name.endswith(".tmp")]
    assert _pool(repo / "kvplan.lock", "prod.yaml") in (BASE_TOKENS, IDX39_TOKENS)
    # the next run, holding the lock, removes any temporary a SIGKILLed run left behind
    assert run("lock", "prod.yaml").exit_code == 0
    assert not [x for x in repo.iterdir() if x.name.endswith(".tmp")]


def test_two_concurrent_locks_keep_both_entries(repo: Path) -> None:
    for i in range(3):
        (repo / "kvplan.lock").unlink(missing_ok=True)
        a = _kvplan("lock", "base.yaml", cwd=repo)
        b = _kvplan("lock", "indexer39.yaml", cwd=repo)
        for p in (a, b):
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, (i, err.decode())
        entries = parse_lock((repo / "kvplan.lock").read_text(), "kvplan.lock")
        assert {k: f.pool_tokens for k, f in entries.items()} == {
            "base.yaml": BASE_TOKENS,
            "indexer39.yaml": IDX39_TOKENS,
        }
    assert not [x for x in repo.iterdir() if x.name.endswith(".tmp")]
    json.loads((repo / "kvplan.lock").read_text())
    assert not sidecar(repo / "kvplan.lock").exists()


def test_lock_leaves_no_file_but_the_lock(repo: Path) -> None:
    # issue 29: `kvplan lock` left kvplan.lock.lck, which a config repository's `git add -A` committed
    before = {x.name for x in repo.iterdir()}
    assert run("lock", "base.yaml").exit_code == 0
    assert run("lock", "indexer39.yaml").exit_code == 0  # a merge into the lock: the read-modify-write path
    assert {x.name for x in repo.iterdir()} == before | {"kvplan.lock"}


def test_plot_refuses_to_replace_the_trace_it_reads(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    # a trace named like an image is still an input: --plot must not replace it
    trace = tmp_path / "trace.png"
    trace.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 16, "hash_ids": [1, 2]}\n')
    before = trace.read_bytes()
    r = run("simulate", str(trace), "--trace-format", "mooncake", "--sweep", "1e5..1e6", "--points", "2",
            "--plot", str(trace))  # fmt: skip
    one_error(r, 2, "which this command reads")
    assert trace.read_bytes() == before


def test_lock_held_by_another_run_is_a_clean_exit_2(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.fsio

    monkeypatch.setattr(kvplan.fsio, "LOCK_TIMEOUT_S", 0.2)
    assert run("lock", "base.yaml").exit_code == 0
    before = (repo / "kvplan.lock").read_bytes()
    with exclusive(repo / "kvplan.lock", "test"):  # another kvplan lock in the middle of its write
        r = run("lock", "bf16.yaml")
    one_error(r, 2, "another kvplan has held kvplan.lock.lck for 0.2 s")
    assert (repo / "kvplan.lock").read_bytes() == before
