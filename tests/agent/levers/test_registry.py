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


def test_the_order_the_levers_depend_on_is_kept() -> None:
    """First-wins dispatch makes the order semantic (the comment on SMALL_MODEL_LEVERS)."""
    at = LEVERS.index
    assert at("push_after_error") < at("unbacked_answer"), "it reads error_pushed"
    assert at("nudge_no_code") < at("push_after_error") < at("prompt_echo") < at("grounding_check")
    assert at("no_install") < at("stall_guard") and at("prose_cell") < at("stall_guard")
    assert at("preflight") < at("auto_import"), "auto_import imports for the corrected cell"
    assert at("data_preview") < at("printed_answer"), "the preview is the first note"


def test_result_check_comes_last_and_only_when_a_result_is_asked_for() -> None:
    missing = lambda: True  # noqa: E731
    assert "result_check" not in [lv.name for lv in levers_for(Settings(home="."), missing)]
    made = levers_for(Settings(home=".", ask_result=True, levers="none"), missing)
    assert [lv.name for lv in made] == ["result_check"]
    made = levers_for(Settings(home=".", ask_result=True), missing)
    assert made[-1].name == "result_check" and len(made) == len(LEVERS) + 1
