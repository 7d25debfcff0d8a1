"""Attacks by a remote kernel on the host, through the files it hands back.

A real Kernel Gateway or Enterprise Gateway kernel (on 127.0.0.1, in a root dir of
its own) either makes
hostile files for real (a symlink to /etc/passwd, ``.git/config``, a setuid file, a
fifo, a name with control characters, a huge sparse file) or replaces the kernel-side
transfer functions to lie (``../`` names, wrong hashes, more bytes than listed, junk
chunks). Each is refused with a note; what passes is pulled into a private staging dir and
comes back as content, like a local run's files: one archive ``<notebook>_files/work.zip``,
and ``set_result``'s inert data files flat in ``<notebook>_files/result/``. Root's git,
pytest and Python run nothing of the kernel's in any of them (the property test, with the
payloads of ``payloads.py``).
"""

from __future__ import annotations

import asyncio
import os
import zipfile
from pathlib import Path

import pytest
from gateway_server import GATEWAYS, running
from payloads import DECLARED, LIVE_AS_TREE, LOOSE, extract_control, plant, probe

from kernel_agent.edges.delivery import DeliveryLimits
from kernel_agent.executors.gateway import AsyncGatewaySession
from kernel_agent.remote.transfer import TransferLimits
from kernel_agent.remote.work import RemoteWork

pytestmark = pytest.mark.timeout(180)
TOKEN = "remote-attacks-token"

#: makes the kernel-side module, then lets ``code`` replace its functions (``m``)
PATCH = "import sys\nm = sys.modules['_kernel_agent_files']\n"


@pytest.fixture(scope="module", params=GATEWAYS)
def gateway(request, tmp_path_factory):
    with running(request.param, tmp_path_factory.mktemp(f"{request.param}-root"), TOKEN) as gw:
        yield gw


def deliver(gateway, tmp_path, code, limits=None, raw_chunks=True, declared=()):
    """Run ``code`` in a fresh gateway kernel (in its work dir), then deliver its files:
    ``(notebook, members of the archive, notes, the Delivery)``."""
    nb = tmp_path / "nbdir" / "run.ipynb"
    nb.parent.mkdir(parents=True, exist_ok=True)

    async def go():
        session = AsyncGatewaySession(gateway.url, TOKEN, "python3")
        session.files = RemoteWork(
            session,
            limits=limits or DeliveryLimits(),
            transfer=TransferLimits(raw_chunks=raw_chunks),
        )
        await session.start()
        try:
            r = await session.execute(code)
            assert r.ok, r.error
            return await session.files.deliver(nb, declared)
        finally:
            await session.shutdown()

    found = asyncio.run(go())
    return nb, found.members, found.notes, found


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_links_dot_dirs_specials_setuid_and_control_names_are_refused(tmp_path, gateway):
    code = (
        "import os\n"
        "os.symlink('/etc/passwd', 'passwd')\n"
        "os.symlink('/', 'root')\n"
        "os.makedirs('.git'); open('.git/config', 'w').write('[core]')\n"
        "os.makedirs('deep/.hidden'); open('deep/.hidden/key', 'w').write('k')\n"
        "os.mkfifo('pipe')\n"
        "open('suid', 'w').write('x'); os.chmod('suid', 0o4755)\n"
        "open('evil\\x1b[2Jname.txt', 'w').write('x')\n"
        "open('rtl\\u202etxt.exe', 'w').write('x')\n"
        "open('fine.txt', 'w').write('ok')\n"
    )
    nb, delivered, notes, found = deliver(gateway, tmp_path, code)
    assert delivered == ["fine.txt"]
    assert tree(nb.parent) == ["run_files", "run_files/work.zip"]
    text = "\n".join(notes)
    assert "passwd: a symlink, not a file" in text and "root: a symlink" in text
    assert "pipe: a other, not a file" in text
    assert "suid: setuid" in text
    assert "U+001B" in text and "U+202E" in text
    assert notes[0] == ("2 dot-named path(s), hidden state rather than results: .git, deep/.hidden")


def test_a_huge_file_and_too_many_files_are_bounded(tmp_path, gateway):
    code = (
        "with open('huge.bin', 'wb') as f:\n    f.truncate(60 * 1024 * 1024)\n"
        "for i in range(8):\n    open(f'f{i}.txt', 'w').write('x' * 400)\n"
    )
    limits = DeliveryLimits(max_files=5, max_file_bytes=50 * 1024 * 1024, max_total_bytes=1000)
    nb, delivered, notes, found = deliver(gateway, tmp_path, code, limits)
    assert delivered == ["f0.txt", "f1.txt"]  # the total bound: 1000 bytes
    assert any(n.startswith("huge.bin (62914560 bytes) is over the size bound") for n in notes)
    assert any(n.startswith("f2.txt (400 bytes)") for n in notes)
    assert found.archive.stat().st_size < 1500


def test_depth_and_entry_count_are_bounded_and_said(tmp_path, gateway):
    deep = (
        "import os\nos.makedirs('/'.join('d' * 10))\nopen('d/' * 10 + 'deep.txt', 'w').write('x')"
    )
    nb, delivered, notes, found = deliver(gateway, tmp_path / "a", deep)
    assert delivered == [] and notes == ["what is below 8 directory levels: d/d/d/d/d/d/d/d"]
    many = "import os\nos.makedirs('m')\nfor i in range(1200):\n    open(f'm/{i:04}', 'w').close()"
    nb, delivered, notes, found = deliver(
        gateway, tmp_path / "b", many, DeliveryLimits(max_files=3)
    )
    assert delivered == ["m/0000", "m/0001", "m/0002"]
    assert notes == ["everything past the first 30 entries", "more than 3 files"]


def test_lying_names_never_reach_the_filesystem(tmp_path, gateway):
    names = ["../escape.txt", "/tmp/abs-escape.txt", "a/../../up.txt", "./dot.txt", "a//b.txt"]
    code = PATCH + (
        f"m.listing = lambda *a: m._Json([[n, 'file', 3, 0o644] for n in {names!r}])\n"
        "m.get = lambda *a: m._Json({'data': 'eHl6', 'eof': True, 'size': 3,"
        " 'sha256': __import__('hashlib').sha256(b'xyz').hexdigest()})\n"
    )
    nb, delivered, notes, found = deliver(gateway, tmp_path, code)
    assert delivered == [] and len(notes) == len(names)
    assert all(n.startswith("refused a name:") for n in notes)
    assert tree(nb.parent) == []
    assert not (tmp_path / "escape.txt").exists() and not Path("/tmp/abs-escape.txt").exists()


#: kernel-side ``get(name, offset, size, comm_id)`` replacements, as ``lambda *a: ...``;
#: ``m._publish(a[3], data)`` sends raw bytes the way the real one does
RAW_LIES = [
    # the right bytes, a wrong hash
    (
        "(m._publish(a[3], b'xyz'), m._Json({'sent': 3, 'eof': True, 'size': 3, 'sha256': '0' * 64}))[1]",
        "sha256",
    ),
    # listed as 3 bytes, sends 6
    (
        "(m._publish(a[3], b'xyzxyz'), m._Json({'sent': 6, 'eof': True, 'size': 6, 'sha256': ''}))[1]",
        "more than",
    ),
    # a count that is not what was sent
    (
        "(m._publish(a[3], b'xyz'), m._Json({'sent': 2, 'eof': True, 'size': 3, 'sha256': ''}))[1]",
        "count",
    ),
    # no bytes at all
    ("m._Json({'sent': 3, 'eof': True, 'size': 3, 'sha256': ''})", "no chunk arrived"),
    # two chunks for one call
    (
        "(m._publish(a[3], b'x'), m._publish(a[3], b'yz'), m._Json({'sent': 1}))[2]",
        "more than one chunk",
    ),
    # a short chunk that never ends the file
    ("(m._publish(a[3], b'x'), m._Json({'sent': 1}))[1]", "short chunk"),
    # an answer far larger than it may be: dropped where the reply is parsed (a
    # user_expression over the host's bound is never kept)
    ("m._Json({'data': 'A' * (8 * 1024 * 1024)})", "within the host's bounds"),
]
BASE64_LIES = [
    # JSON nested too deep to parse (400,000 characters: dropped where the reply is parsed)
    ("type('D', (), {'__repr__': lambda s: '[' * 200000 + ']' * 200000})()", "within the host's"),
    ("type('D', (), {'__repr__': lambda s: '[' * 90000 + ']' * 90000})()", "not JSON"),
    ("m._Json({'data': 'eHl6', 'eof': True, 'size': 3, 'sha256': '0' * 64})", "sha256"),
    ("m._Json({'data': 'eHl6eHl6', 'eof': True, 'size': 6, 'sha256': ''})", "more than"),
    ("m._Json({'data': '!!!!', 'eof': True, 'size': 3, 'sha256': ''})", "not base64"),
    ("m._Json({'data': 'eA==', 'size': 1})", "short chunk"),
    ("m._Json({'data': 'A' * (8 * 1024 * 1024)})", "within the host's bounds"),
    ("m._Json({'data': 'A' * 249700})", "over the"),  # kept, but over one chunk's reply
]


@pytest.mark.parametrize(
    ("raw", "get", "why"),
    [(True, g, w) for g, w in RAW_LIES] + [(False, g, w) for g, w in BASE64_LIES],
)
def test_lying_contents_are_refused_and_leave_nothing(tmp_path, gateway, raw, get, why):
    code = PATCH + (
        "open('out.txt', 'w').write('xyz')\n"
        "m.listing = lambda *a: m._Json([['out.txt', 'file', 3, 0o644]])\n"
        f"m.get = lambda *a: {get}\n"
    )
    nb, delivered, notes, found = deliver(gateway, tmp_path, code, raw_chunks=raw)
    assert delivered == [] and len(notes) == 1 and why in notes[0], notes
    assert tree(nb.parent) == []


def test_a_link_planted_at_the_target_is_replaced_not_followed(tmp_path, gateway):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    files = tmp_path / "nbdir" / "run_files"
    files.mkdir(parents=True)
    os.symlink(victim, files / "work.zip")
    nb, delivered, notes, found = deliver(gateway, tmp_path, "open('out.txt', 'w').write('new')")
    assert delivered == ["out.txt"] and notes == []
    assert victim.read_text() == "keep me" and not (files / "work.zip").is_symlink()
    with zipfile.ZipFile(files / "work.zip") as zf:
        assert zf.read("out.txt") == b"new"


def test_no_pulled_back_tree_runs_anything_under_git_pytest_or_python(tmp_path, gateway):
    """D3: the review's bare repository and its cousins, pulled back from a gateway kernel."""
    mark = tmp_path / "markers"
    mark.mkdir()
    nb, members, notes, _ = deliver(gateway, tmp_path, plant(mark), declared=DECLARED)
    files = nb.parent / "run_files"
    assert tree(files) == sorted(["work.zip", "result", *(f"result/{n}" for n in LOOSE)])
    assert {"report/config", "conftest.py", "__pycache__/helper.cpython-311.pyc"} <= set(members)
    assert "18 declared file(s) are not plain data files and stay only in work.zip" in notes[-1]
    assert probe(nb.parent, mark, project=nb.parent) == set()
    assert os.listdir(mark) == []
    control = extract_control(files / "work.zip", tmp_path / "control")  # as it used to land
    assert LIVE_AS_TREE <= probe(control, mark, project=control)


@pytest.mark.parametrize(
    "name",
    [
        "../x", "/etc/passwd", "a/../b", "./a", "a//b", "a/", "", ".git/config", "a/.env",
        "x\x00y", "x\ny", "x\x1by", "x\u202ey", "x\u200by", "x" * 2000, "é" * 200,
        "/".join("d" * 9), 7, None,
    ],
)  # fmt: skip
def test_check_name_refuses(name):
    from kernel_agent.errors import UnsafePath
    from kernel_agent.remote.names import check_name

    with pytest.raises(UnsafePath):
        check_name(name)


@pytest.mark.parametrize("name", ["out.csv", "a/b/c.txt", "résumé – final.pdf", "x..y", "a b"])
def test_check_name_keeps_plain_names(name):
    from kernel_agent.remote.names import check_name

    assert check_name(name) == name
