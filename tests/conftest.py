from __future__ import annotations

import os

import pytest
from hypothesis import settings

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

# No test reaches the Hugging Face Hub: a repo id not cached is an error naming the caches (tests/models/test_hub.py
# stands a local server in for the Hub and clears this for its own runs).
os.environ["HF_HUB_OFFLINE"] = "1"

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile("fuzz-long", max_examples=2000, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", help="run the fuzz suite (tests/fuzz) with 2,000 examples per test"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fuzz-long", default=False):
        settings.load_profile("fuzz-long")


def make_plan(deploy: str = "glm-5.3-8xh200-sglang", model: ModelArch | str | None = None, **sets: object) -> PoolPlan:
    """A plan for a preset deployment with `--set` overrides given as keyword arguments."""
    dep = load_deployment(deploy, [f"{k}={v}" for k, v in sets.items()])
    arch = model if isinstance(model, ModelArch) else load_model(model or dep.model)
    return plan_pool(arch, dep)


@pytest.fixture(scope="session")
def glm53() -> ModelArch:
    return load_model("glm-5.3")
