"""no_install: installs in a kernel that cannot install are refused, and count as a stall."""

from __future__ import annotations

from kernel_agent.agent.levers.no_install import NoInstall
from kernel_agent.agent.state import Ask, TaskState


def test_installs_are_refused_naming_what_is_installed() -> None:
    st = TaskState("t", libraries={"pandas": "2.2", "scipy": "1.14"})
    lever = NoInstall()
    for code in (
        "!pip install sympy",
        "%pip install -q sympy",
        "import subprocess\nsubprocess.run(['pip', 'install', 'sympy'])",
        "!apt-get install -y r-base",
        "x = 1\n!pip3 install polars",
    ):
        ask = lever.before_cell(st, code)
        assert isinstance(ask, Ask) and "pandas, scipy" in ask.message, code
        assert not ask.failure
    assert st.stalls == 5
    for code in ("import pandas as pd", "print('pip install is not possible')", "!ls"):
        assert lever.before_cell(st, code) is None, code


def test_under_an_install_policy_the_model_is_pointed_at_install_package() -> None:
    ask = NoInstall("allow:sympy").before_cell(TaskState("t"), "!pip install sympy")
    assert isinstance(ask, Ask) and 'install_package("name")' in ask.message
    assert "allow:sympy" in ask.message
