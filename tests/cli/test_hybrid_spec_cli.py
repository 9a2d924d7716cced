"""``kvplan admit --ctx 128K --model <hybrid> --set speculative_num_draft_tokens=N`` on both engines (issue 13):
a verdict (exit 0 admitted / 1 rejected) where the engine serves MTP on the model, one line and exit 2 where it has no
draft (Kimi-Linear) or where kvplan does not plan it (gpt-oss's EAGLE3 drafts, Kimi-K3's MTP)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})
VLLM = ("-d", "glm-5.3-8xh200-vllm")


@pytest.mark.parametrize(
    ("model", "extra", "code", "says"),
    [
        ("qwen3-next-80b-a3b", (), 0, "NEXTN / EAGLE, 2 draft tokens"),
        ("qwen3-next-80b-a3b", (*VLLM, "--set", "context_length=262144"), 0, "MTP, num_speculative_tokens 2"),
        ("glm-5.3-flash", (), 0, "NEXTN / EAGLE, 2 draft tokens"),
        ("glm-5.3-flash", VLLM, 0, "glm5_next_mtp, num_speculative_tokens 2"),
        ("deepseek-v4-flash", (), 0, "MTP / NEXTN, 2 draft tokens"),
        ("deepseek-v4-flash", VLLM, 0, "MTP, num_speculative_tokens 2"),
    ],
)
def test_admit_128k_with_mtp_is_a_verdict(model: str, extra: tuple[str, ...], code: int, says: str) -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", model, *extra, "--set",
                            "speculative_num_draft_tokens=2"])  # fmt: skip
    assert r.exit_code == code, (r.stdout[-600:], r.stderr)
    assert says in r.stdout


@pytest.mark.parametrize(
    ("model", "extra", "says"),
    [
        ("kimi-linear-48b-a3b", (), "has no draft for speculative decoding with Kimi-Linear"),
        ("kimi-linear-48b-a3b", VLLM, "Unsupported speculative method: 'mtp'"),
        ("gpt-oss-120b", (), "speculative decoding with a hybrid model other than Qwen3-Next and GLM-5.3-Flash"),
        ("gpt-oss-120b", VLLM, "speculative decoding on a hybrid model other than Qwen3-Next and GLM-5.3-Flash"),
    ],
)
def test_mtp_refusals_are_one_line(model: str, extra: tuple[str, ...], says: str) -> None:
    r = runner.invoke(app, ["admit", "--ctx", "4K", "--model", model, *extra, "--set",
                            "speculative_num_draft_tokens=2", "--set", "context_length=131072"])  # fmt: skip
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: ") and says in lines[0], lines
