"""What a type checker sees of the package: the sync facades and the HTTP client have
real, typed methods.

Runs mypy (as a user of the typed package would) on a snippet and reads its
``reveal_type`` notes. The package's own sources come first on the search path.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_agent.client import AsyncClient, Client, _Api, _awaits, _sends
from kernel_agent.executors.gateway import GatewaySession
from kernel_agent.executors.kernel import AsyncKernelSession, KernelSession
from kernel_agent.llm.local_server import LocalModelServer
from kernel_agent.syncify import blocking

pytestmark = pytest.mark.timeout(300)

#: mypy runs from here, with the project's configuration and cache (as ``make lint`` does)
REPO = Path(__file__).resolve().parents[1]

SNIPPET = """
from kernel_agent import AsyncKernelSession, GatewaySession, KernelSession
from kernel_agent.executors.base import AsyncExecutor
from kernel_agent.llm.local_server import LocalModelServer
from pathlib import Path

k = KernelSession("python3")
reveal_type(k)
reveal_type(k.execute)
reveal_type(k.execute("1").outputs)
reveal_type(k.is_alive())
reveal_type(k.kernel_cwd)
reveal_type(k.isolation)
reveal_type(k.aio)
with KernelSession() as entered:
    reveal_type(entered)
k.execute(42)  # wrong: code is a str

g = GatewaySession("http://127.0.0.1:1", "token")
reveal_type(g.execute)
reveal_type(g.restart)
reveal_type(LocalModelServer(Path("model.gguf")).start)

def check(executor: AsyncKernelSession) -> AsyncExecutor:
    return executor

from kernel_agent.client import AsyncClient, Client

c = Client("http://127.0.0.1:1", token="t")
reveal_type(c.create_session)
reveal_type(c.sessions())
reveal_type(c.execute("s", "1"))
reveal_type(c.execute("s", "1").error)
reveal_type(c.files("s"))
reveal_type(c.download("s", "p"))
reveal_type(c.upload("s", "p", b""))
reveal_type(c.get_run("s", "r"))
reveal_type(c.run("s", "t"))

async def use_async() -> None:
    a = AsyncClient("http://127.0.0.1:1")
    reveal_type(a.execute)
    reveal_type(await a.notebook("s", clean=True))
    reveal_type(await a.start_run("s", "t"))
    reveal_type(a.run("s", "t"))

c.execute("s", 42)  # wrong: code is a str
"""


@pytest.fixture(scope="module")
def revealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    """(the revealed types in order, the errors) mypy reports for :data:`SNIPPET`."""
    folder = tmp_path_factory.mktemp("typing")
    (folder / "use.py").write_text(textwrap.dedent(SNIPPET))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(folder / "use.py")],
        cwd=REPO, env={"MYPYPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    found = map(re.compile(r'Revealed type is "(.*)"').search, lines)
    notes = [m.group(1).replace("builtins.", "") for m in found if m]
    errors = [line for line in lines if "use.py" in line and ": error:" in line]
    assert notes, proc.stdout + proc.stderr
    return notes, errors


def test_kernel_session_shows_typed_methods(revealed: tuple[list[str], list[str]]) -> None:
    notes, _ = revealed
    facade, execute, outputs, alive, cwd, isolation, aio, entered = notes[:8]
    assert facade == "kernel_agent.executors.kernel.KernelSession"
    assert execute.startswith("def (code: str, timeout: float | None =, on_output: ")
    assert execute.endswith(
        ", user_expressions: dict[str, str] | None =) -> kernel_agent.results.CellResult"
    )
    assert outputs == "list[Any]" and alive == "bool" and cwd == "pathlib.Path | None"
    assert isolation == "kernel_agent.executors.base.Isolation"
    assert aio == "kernel_agent.executors.kernel.AsyncKernelSession"
    assert entered == "kernel_agent.executors.kernel.KernelSession"


def test_a_wrong_argument_is_an_error(revealed: tuple[list[str], list[str]]) -> None:
    _, errors = revealed
    assert len(errors) == 2  # the kernel's execute and the client's
    assert all('incompatible type "int"; expected "str"' in e for e in errors), errors


def test_gateway_and_local_model_facades_are_typed(revealed: tuple[list[str], list[str]]) -> None:
    notes, _ = revealed
    execute, restart, server_start = notes[8:11]
    assert execute.endswith("-> kernel_agent.results.CellResult")
    assert restart == server_start == "def ()"


@pytest.mark.parametrize("facade", [KernelSession, GatewaySession, LocalModelServer])
def test_every_public_coroutine_method_blocks_on_the_facade(facade: type) -> None:
    public = [
        name
        for name, _ in inspect.getmembers(facade._async_class, inspect.iscoroutinefunction)
        if not name.startswith("_")
    ]
    assert "start" in public
    for name in public:
        assert isinstance(inspect.getattr_static(facade, name), blocking), name


def test_a_facade_blocks_forwards_and_closes(tmp_path: Path) -> None:
    with KernelSession(cwd=tmp_path) as kernel:
        assert kernel.execute("6 * 7").outputs[0].data["text/plain"] == "42"
        assert kernel.is_alive() and kernel.kernel_cwd == tmp_path.resolve()
        assert kernel.execute.__doc__ == AsyncKernelSession.execute.__doc__
        assert kernel.max_output_chars == kernel.aio.max_output_chars  # read from the async one
    assert not kernel.is_alive()


def test_the_http_client_returns_result_types(revealed: tuple[list[str], list[str]]) -> None:
    notes, _ = revealed
    create, sessions, cell, error, files, body, size, run, events = notes[11:20]
    assert create == (
        "def (*, kernel: str | None =, ttl: float | None =, **settings: Any) "
        "-> kernel_agent.client.SessionInfo"
    )
    assert sessions == "list[kernel_agent.client.SessionInfo]"
    assert cell == "kernel_agent.client.ExecuteResult"
    assert error.startswith("TypedDict(kernel_agent.client.CellErrorInfo, {'ename': str")
    assert files == "list[kernel_agent.client.FileEntry]"
    assert (body, size, run) == ("bytes", "int", "kernel_agent.client.RunInfo")
    assert events == "typing.Iterator[dict[str, Any]]"


def test_the_async_client_awaits_the_same_types(revealed: tuple[list[str], list[str]]) -> None:
    notes, _ = revealed
    execute, notebook, started, events = notes[20:24]
    assert execute == (
        "def (sid: str, code: str, timeout: float | None =) "
        "-> typing.Coroutine[Any, Any, kernel_agent.client.ExecuteResult]"
    )
    assert (notebook, started) == ("bytes", "kernel_agent.client.RunInfo")
    assert events == "typing.AsyncIterator[dict[str, Any]]"


@pytest.mark.parametrize("client", [Client, AsyncClient])
def test_every_api_entry_is_a_client_method(client: type) -> None:
    entries = [n for n in vars(_Api) if not n.startswith("_")]
    assert len(entries) == 12
    for name in entries:
        method = inspect.getattr_static(client, name)
        assert isinstance(method, _sends | _awaits) and method.build is getattr(_Api, name), name
