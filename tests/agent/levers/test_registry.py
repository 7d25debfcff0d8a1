"""The registry (levers/__init__.py): the levers by name, in their order, made from the
settings."""

from __future__ import annotations

import pytest

from kernel_agent.agent.levers import LEVERS, SMALL_MODEL_LEVERS, levers_for
from kernel_agent.agent.levers.grounding_check import GroundingCheck
from kernel_agent.agent.levers.no_install import NoInstall
from kernel_agent.agent.levers.repeat_guard import RepeatGuard
from kernel_agent.errors import ConfigError
from kernel_agent.settings import Settings


def test_levers_are_chosen_by_name() -> None:
    names = lambda s: [lever.name for lever in levers_for(s)]  # noqa: E731
    assert names(Settings(home=".")) == list(LEVERS)
    assert names(Settings(home=".", levers="none")) == []
    assert names(Settings(home=".", levers="repeat_guard, nudge_no_code")) == [
        "nudge_no_code",
        "repeat_guard",
    ]
    assert Settings.from_env(env={"KERNEL_AGENT_LEVERS": "none"}).levers == "none"
    with pytest.raises(ConfigError, match="unknown lever 'nope'"):
        levers_for(Settings(home=".", levers=("nope",)))
    all_but = names(Settings(home=".", levers="-stall_guard,-data_preview"))
    assert all_but == [n for n in LEVERS if n not in ("stall_guard", "data_preview")]
    with pytest.raises(ConfigError, match="unknown lever 'nope'"):
        levers_for(Settings(home=".", levers="-nope"))


def test_each_lever_is_named_once_by_its_class_and_made_from_the_settings() -> None:
    assert LEVERS == tuple(lever.name for lever in SMALL_MODEL_LEVERS)
    assert len(set(LEVERS)) == len(LEVERS) and all(LEVERS)
    settings = Settings(home=".", llm_output_chars=1234, temperature=1.5, install="any")
    made = {type(lever): lever for lever in levers_for(settings)}
    assert list(made) == list(SMALL_MODEL_LEVERS)
    grounding, repeat, install = made[GroundingCheck], made[RepeatGuard], made[NoInstall]
    assert isinstance(grounding, GroundingCheck) and grounding.output_chars == 1234
    assert isinstance(repeat, RepeatGuard) and repeat.temperature == 1.5
    assert isinstance(install, NoInstall) and install.policy == "any"
