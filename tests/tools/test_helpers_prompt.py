"""The system prompt names only the host helpers a run can use.

``call_tool`` with host tools, ``set_result`` when a result is asked for,
``install_package`` under a policy other than ``never``; nothing (not even the header)
when none of them is usable. The helpers stay defined in the kernel either way. Units
for every combination, then two runs against a real kernel and the scripted server.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.events import RunFinished
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings
from kernel_agent.tools.host import HostSide, helpers_section
from kernel_agent.tools.installs import InstallPolicy

HEADER = "Functions the host provides in the kernel"
TOOLS = "- lookup(city: str) -> dict: The population of a city."
SANDBOX = "none" if bwrap_problem()[0] else "bwrap"


def lookup(city: str) -> dict:
    """The population of a city."""
    return {"city": city, "population": 709_000}


@pytest.mark.parametrize(
    ("tools", "ask_result", "policy"),
    list(itertools.product([False, True], [False, True], ["never", "ask", "allow:rich"])),
)
def test_each_helper_is_described_only_when_the_run_can_use_it(
    tools: bool, ask_result: bool, policy: str
) -> None:
    section = helpers_section(
        TOOLS if tools else "", InstallPolicy.parse(policy), ask_result=ask_result
    )
    usable = tools or ask_result or policy != "never"
    assert section.startswith(HEADER) == usable
    assert (section == "") == (not usable), "nothing usable: no section, no header"
    assert ("call_tool(" in section) == tools and (TOOLS in section) == tools
    assert ("call_tools_parallel(" in section) == tools
    assert "none in this run" not in section
    assert ("set_result(" in section) == ask_result
    assert ("This run wants a structured result" in section) == ask_result
    assert ("install_package(" in section) == (policy != "never")
    assert (f"(install policy: {policy})" in section) == (policy != "never")
    if usable:  # the order is fixed: the same settings give the same text
        wanted = [w for w, on in [("call_tool(", tools), ("set_result(", ask_result)] if on]
        wanted += ["install_package("] if policy != "never" else []
        places = [section.index(w) for w in wanted]
        assert places == sorted(places)


def test_the_section_is_empty_until_the_helpers_are_in_a_kernel(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, ask_result=True, install="any")
    host = HostSide(settings, [lookup])
    assert host.prompt_section() == "", "not attached (no Python kernel): nothing to describe"
    host.active = True
    section = host.prompt_section()
    assert "lookup(city: str) -> dict" in section and "set_result(" in section
    assert "(install policy: any)" in section
    host.active, plain = True, HostSide(Settings(home=tmp_path))
    plain.active = True
    assert plain.prompt_section() == ""
    assert host.prompt_section() == section, "the same settings: the same text"


def _run(fake_llm, tmp_path: Path, tools=(), **kw) -> tuple[str, str]:
    tmp_path.mkdir()
    first = len(fake_llm.requests)
    settings = scripted_settings(fake_llm, tmp_path, sandbox=SANDBOX, levers="none", **kw)
    with Agent(settings, tools=tools) as agent:
        events = list(agent.run("which helpers are there?"))
    assert isinstance(events[-1], RunFinished)
    result = events[-1].result
    assert result.status == "ok", result.answer
    return fake_llm.requests[first]["messages"][0]["content"], result.cells[0].outputs[0]["text"]


def test_a_run_without_usable_helpers_is_not_told_of_them_yet_has_them(fake_llm, tmp_path):
    probe = "print([callable(f) for f in (call_tool, call_tools_parallel, set_result, install_package)])"  # noqa: E501
    fake_llm.enqueue(run_cell(probe), text("They are all there."))
    system, printed = _run(fake_llm, tmp_path / "bare")
    assert printed == "[True, True, True, True]\n", "the helpers are still in the kernel"
    for word in (HEADER, "call_tool", "set_result", "install_package", "none in this run"):
        assert word not in system, word
    code = "r = call_tool('lookup', city='Oslo')\nset_result(r)\nprint(r['population'])"
    fake_llm.enqueue(run_cell(code), text("709000"))
    system, printed = _run(
        fake_llm, tmp_path / "full", tools=[lookup], ask_result=True, install="allow:rich"
    )
    assert printed == "709000\n"
    section = system[system.index(HEADER) :]
    assert "lookup(city: str) -> dict" in section and "set_result(" in section
    assert "(install policy: allow:rich)" in section
    # the part that varies stays late: only the work dir's line comes after the helpers
    assert system.index(HEADER) > system.index("Follow the task's answer format")
    last = section.rstrip().splitlines()[-1]
    assert last.startswith("The kernel runs in "), section[-300:]
