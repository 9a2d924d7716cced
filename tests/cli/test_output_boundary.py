"""The error boundary: every exception is one line and an exit code; exit 1 is only ever the verdict.

Exit codes (kvplan.errors): 0 ok, 1 verdict, 2 bad input, 3 probe unavailable, 4 a kvplan bug, 130 Ctrl-C.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import kvplan.cli
import kvplan.plan.admit
from kvplan.cli import app
from kvplan.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBE_UNAVAILABLE,
    EXIT_REJECTED,
    ProbeUnavailable,
)

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def one_line(result: Result, code: int) -> str:
    """Exit `code`, exactly one line on stderr, no traceback anywhere; returns the line."""
    detail = f"exit {result.exit_code}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{result.exception!r}\n{detail}"
    assert result.exit_code == code, detail
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), detail
    assert "Traceback" not in result.stdout + result.stderr, detail
    return result.stderr


def raising(exc: BaseException) -> Any:
    def boom(*_: object, **__: object) -> None:
        raise exc

    return boom


def test_the_exit_codes_are_distinct_and_1_is_the_verdict() -> None:
    codes = [EXIT_OK, EXIT_REJECTED, EXIT_BAD_INPUT, EXIT_PROBE_UNAVAILABLE, EXIT_INTERNAL, EXIT_INTERRUPTED]
    assert codes == [0, 1, 2, 3, 4, 130]


def test_an_unexpected_exception_is_an_internal_error_exit_4(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: a bare exception in a command used to escape as a traceback (exit 1 in a shell).
    monkeypatch.setattr(kvplan.plan.admit, "admit", raising(ValueError("slope\nof zero")))
    line = one_line(invoke("admit", "--ctx", "1M"), EXIT_INTERNAL)
    assert line == (
        "kvplan: internal error: ValueError: slope of zero "
        "(this is a kvplan bug; please report it with the command line)\n"
    )


def test_internal_error_under_json_is_a_document_on_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvplan.plan.admit, "admit", raising(ZeroDivisionError("division by zero")))
    r = invoke("admit", "--ctx", "1M", "--format", "json")
    one_line(r, EXIT_INTERNAL)
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 4 and doc["schema_version"] == 1
    assert doc["error"].startswith("ZeroDivisionError: division by zero")


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (PermissionError(13, "Permission denied", "/etc/d.yaml"), "cannot read /etc/d.yaml: Permission denied"),
        (IsADirectoryError(21, "Is a directory", "conf"), "cannot read conf: Is a directory"),
        (UnicodeDecodeError("utf-8", b"\xff\xfe", 0, 1, "invalid start byte"), "not UTF-8 text: invalid start byte"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (MemoryError(), "out of memory reading the input"),
    ],
)
def test_input_failures_that_escape_a_reader_are_exit_2(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, words: str
) -> None:
    monkeypatch.setattr(kvplan.cli.admit, "load_plan", raising(exc))
    line = one_line(invoke("admit", "--ctx", "1M"), EXIT_BAD_INPUT)
    assert line.startswith("kvplan: error: ") and words in line, line


def test_probe_unavailable_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvplan.cli.admit, "load_plan", raising(ProbeUnavailable("no NVIDIA driver")))
    assert one_line(invoke("admit", "--ctx", "1M"), EXIT_PROBE_UNAVAILABLE) == "kvplan: error: no NVIDIA driver\n"


def test_ctrl_c_in_a_command_is_130_not_1(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: click turned Ctrl-C into Abort, which the CLI reported as "aborted", exit 1 (the verdict's code).
    monkeypatch.setattr(kvplan.plan.admit, "admit", raising(KeyboardInterrupt()))
    assert one_line(invoke("admit", "--ctx", "1M"), EXIT_INTERRUPTED) == "kvplan: interrupted\n"


class _InterruptImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, *_: object) -> None:
        if name == "kvplan.cli._app":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_during_start_up_is_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Ctrl-C while the app's modules are still importing: main() is already inside the boundary.
    monkeypatch.delitem(sys.modules, "kvplan.cli._app")
    monkeypatch.setattr(sys, "meta_path", [_InterruptImport(), *sys.meta_path])
    with pytest.raises(SystemExit) as e:
        kvplan.cli.main()
    assert e.value.code == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "kvplan: interrupted\n"


def test_bad_input_under_json_is_a_document_on_stdout() -> None:
    # Regression: errors used to leave stdout empty under --format json.
    r = invoke("admit", "--ctx", "1Q", "--format", "json")
    line = one_line(r, EXIT_BAD_INPUT)
    doc = json.loads(r.stdout)
    assert doc == {"error": line.removeprefix("kvplan: error: ").rstrip("\n"), "exit_code": 2, "schema_version": 1}


@pytest.mark.parametrize("form", [["--format", "json"], ["--format=json"], ["-f", "json"], ["-fjson"]])
def test_usage_error_under_json_is_a_document_on_stdout(form: list[str]) -> None:
    r = invoke("admit", *form, "--no-such-option")
    one_line(r, EXIT_BAD_INPUT)
    assert json.loads(r.stdout)["exit_code"] == 2


def test_json_from_the_environment_covers_errors_too() -> None:
    r = CliRunner(env={"KVPLAN_FORMAT": "json"}).invoke(app, ["admit", "--ctx", "-5"])
    one_line(r, EXIT_BAD_INPUT)
    assert json.loads(r.stdout)["exit_code"] == 2


def test_table_errors_leave_stdout_empty() -> None:
    r = invoke("admit", "--ctx", "1Q")
    one_line(r, EXIT_BAD_INPUT)
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("args", "helper"),
    [
        (["admit", "--no-such-option"], "kvplan admit --help"),
        (["admit"], "kvplan admit --help"),
        (["deployments", "show"], "kvplan deployments show --help"),
        (["no-such-command"], "kvplan --help"),
    ],
)
def test_usage_errors_point_at_the_subcommands_help(args: list[str], helper: str) -> None:
    # Regression: every usage error said "(see kvplan --help)".
    line = one_line(invoke(*args), EXIT_BAD_INPUT)
    assert line.endswith(f"(see {helper})\n"), line


@pytest.mark.parametrize("args", [[], ["models"], ["deployments"]])
def test_no_arguments_is_help_and_exit_0(args: list[str]) -> None:
    # Regression: `kvplan` alone printed its help and exited 2, as if asking for help were an error.
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.stdout and r.stderr == ""


# --------------------------------------------------------------------------- real processes


def kvplan_process(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, "KVPLAN_FORMAT": "table", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "kvplan", *args], env=full_env, **kw)


@pytest.mark.parametrize(("ctx", "verdict"), [("128K", EXIT_OK), ("1M", EXIT_REJECTED)])
def test_a_closed_stdout_keeps_the_verdicts_exit_code(ctx: str, verdict: int) -> None:
    # Regression: `kvplan admit --ctx 128K | head -1` exited 1 (BrokenPipeError) although the request is admitted.
    p = kvplan_process("admit", "--ctx", ctx, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader is gone before kvplan writes a byte (start-up takes far longer than this)
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=60) == verdict, err
    assert err == b""


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"}])
def test_an_ascii_terminal_gets_ascii_not_a_crash(env: dict[str, str], fmt: str) -> None:
    # Regression: "×" and "−" raised UnicodeEncodeError on an ASCII stdout.
    p = kvplan_process("admit", "--ctx", "1M", "--format", fmt, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    assert p.returncode == EXIT_REJECTED, err
    text = out.decode("ascii")  # raises if anything non-ASCII got through
    # main MLA KV row: 656 B (fp8_ds_mla) × 78 layers, with × written as x
    assert "656 B (fp8_ds_mla) x 78 layers" in text
    assert err == b""


def test_columns_0_still_prints_every_figure() -> None:
    # Regression: COLUMNS=0 printed nothing and exited 0.
    p = kvplan_process("admit", "--ctx", "1M", env={"COLUMNS": "0"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    assert p.returncode == EXIT_REJECTED, err
    # 567,616 pool tokens: 28.52 GiB available // 53,940 B a row, rounded down to 64-token pages (engine goldens)
    assert b"567,616" in out


@pytest.mark.parametrize("args", [["--help"], ["admit", "--help"], []])
def test_help_into_a_closed_pipe_is_exit_0(args: list[str]) -> None:
    # Regression: click answers a closed stdout with exit 1, the verdict's code, for `kvplan --help | head -1`
    p = kvplan_process(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=60) == EXIT_OK, err
    assert err == b""


def test_an_error_quoting_control_characters_is_still_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # a reader that quotes raw input (a safetensors dimension of "\n", a terminal escape) must still print one line
    from kvplan.cli._common import fail

    fail("header: \n\x1b[31m is not a dimension", 2)
    err = capsys.readouterr().err
    assert err == "kvplan: error: header: \\n\\x1b[31m is not a dimension\n", err
