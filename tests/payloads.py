"""Returned files are content: the payloads a kernel plants, and the probe that runs root's tools.

:func:`plant` is kernel code that writes, into its work dir, files that make a tool run the
kernel's code when root runs that tool in or above the tree they land in. Each payload, when
it runs, writes ``MARK/<name>``. :func:`probe` runs, in every directory under a root (and the
root itself), what a user does there: ``git status``, ``git -C DIR log``, ``pytest
--collect-only`` (in the dir, and from a project dir above it), ``python -c "import STEM"``
for every file stem and subdirectory, and ``python -c pass``; it returns the markers that
appeared. The property: after delivery, :func:`probe` of everything delivered finds none.
:func:`extract_control` lays the archive out as a tree (what delivery used to do), where the
same probe must find markers: the payloads are live, so the property test can fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

#: payloads that run under the probe when laid out as a tree (the control)
LIVE_AS_TREE = {
    "git-bare-fsmonitor",  # the review's D1
    "git-bare-root",  # new: the work dir itself is the git dir (HEAD/config/objects/refs)
    "git-alias",  # new: an alias in that repository's config
    "conftest",  # D4
    "test-module",
    "pytest-ini",
    "tox-ini",  # new
    "setup-cfg",  # new
    "pyproject-toml",  # new
    "package-init",  # new: an ``__init__.py`` package
    "stdlib-shadow",  # new: json.py imported in place of the standard library's
    "pyc-unchecked",  # D5
    "sitecustomize",  # new (imported by name here; at start-up on a site dir)
    "usercustomize",  # new
}

#: every file :func:`plant` writes, dot names and ``__pycache__`` aside
FILES = [
    "report/HEAD", "report/config", "report/objects/keep", "report/refs/keep",
    "report/sub/summary.md",
    "HEAD", "config", "objects/keep", "refs/keep", "data/table.csv",
    "conftest.py", "test_results.py",
    "ini/pytest.ini", "ini/iniplugin.py",
    "tox/tox.ini", "tox/toxplugin.py",
    "cfg/setup.cfg", "cfg/cfgplugin.py",
    "toml/pyproject.toml", "toml/tomlplugin.py",
    "helper.py", "sitecustomize.py", "usercustomize.py", "evil.pth",
    "pkg/__init__.py", "json.py", "summary.csv", "chart.png",
]  # fmt: skip


#: what a run declares to ``set_result`` (its bound is 20 files): the worst, and two results
DECLARED = [
    "report/HEAD", "report/config", "report/objects/keep", "report/refs/keep", "HEAD",
    "config", "conftest.py", "test_results.py", "ini/pytest.ini", "tox/tox.ini",
    "cfg/setup.cfg", "toml/pyproject.toml", "helper.py", "sitecustomize.py", "evil.pth",
    "pkg/__init__.py", "json.py", "ini/iniplugin.py", "summary.csv", "chart.png",
]  # fmt: skip
#: what of :data:`DECLARED` comes back loose: the data files
LOOSE = ["chart.png", "summary.csv"]


def plant(mark: Path) -> str:
    """Kernel code writing every payload into its cwd; each writes ``mark/<name>`` when run."""
    m = str(mark)
    return f"""
import importlib.util, os, py_compile
M = {m!r}
def w(path, text):
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'w').write(text)
def py(name):
    return f"open({{M!r}} + '/{{name}}', 'w').write(str(__import__('os').getuid()))\\n"
def sh(name):
    return f"sh -c 'id > {{M}}/{{name}}' #"
# the review's D1: a dot-free bare repository whose worktree is sub/
for f in ('report/objects/keep', 'report/refs/keep'): w(f, '')
w('report/HEAD', 'ref: refs/heads/main\\n')
w('report/config', '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n'
  '\\tworktree = sub\\n\\tfsmonitor = "' + sh('git-bare-fsmonitor') + '"\\n')
w('report/sub/summary.md', '# Summary\\n')
# new: the work dir itself a git dir, with hooksPath, pager, alias and fsmonitor
for f in ('objects/keep', 'refs/keep'): w(f, '')
w('HEAD', 'ref: refs/heads/main\\n')
w('config', '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = data\\n'
  '\\thooksPath = data\\n\\tpager = "' + sh('git-pager') + '"\\n'
  '\\tfsmonitor = "' + sh('git-bare-root') + '"\\n[alias]\\n\\tst = "!' + sh('git-alias') + '"\\n')
w('data/table.csv', 'a,b\\n1,2\\n')
# pytest: a conftest, a test module, and addopts in each of its four ini files
w('conftest.py', py('conftest'))
w('test_results.py', py('test-module') + 'def test_ok():\\n    pass\\n')
for d, ini, section, plugin in (('ini', 'pytest.ini', '[pytest]', 'iniplugin'),
                                ('tox', 'tox.ini', '[pytest]', 'toxplugin'),
                                ('cfg', 'setup.cfg', '[tool:pytest]', 'cfgplugin'),
                                ('toml', 'pyproject.toml', '[tool.pytest.ini_options]', 'tomlplugin')):
    name = {{'ini': 'pytest-ini', 'tox': 'tox-ini', 'cfg': 'setup-cfg', 'toml': 'pyproject-toml'}}[d]
    if ini.endswith('.toml'):
        w(f'{{d}}/{{ini}}', f'{{section}}\\naddopts = "-p {{plugin}}"\\npythonpath = ["."]\\n')
    else:
        w(f'{{d}}/{{ini}}', f'{{section}}\\naddopts = -p {{plugin}}\\npythonpath = .\\n')
    w(f'{{d}}/{{plugin}}.py', py(name))
# the review's D5: harmless source, other code in an unchecked-hash pyc
w('helper_evil.py', py('pyc-unchecked') + 'VALUE = 2\\n')
py_compile.compile('helper_evil.py', cfile=importlib.util.cache_from_source('helper.py'),
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
os.remove('helper_evil.py')
w('helper.py', '# reviewed, harmless\\nVALUE = 1\\n')
# interpreter start-up hooks, a package, a standard-library name, direnv
w('sitecustomize.py', py('sitecustomize'))
w('usercustomize.py', py('usercustomize'))
w('evil.pth', 'import os; ' + py('pth'))
w('pkg/__init__.py', py('package-init'))
w('json.py', py('stdlib-shadow'))
w('.envrc', 'id > ' + M + '/direnv\\n')
# and honest results
w('summary.csv', 'k,v\\nmean,3.5\\n')
open('chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + py('png').encode())
print('planted')
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GIT_"))}
    # the venv's own pytest plugins are not what is tested (and cost seconds a start); the
    # kernel's conftest, ini files and ``-p`` plugins are still read
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return env


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, timeout=60, check=False)


def probe(root: Path, mark: Path, project: Path | None = None) -> set[str]:
    """Run root's tools in ``root`` and every directory under it; the markers that appeared."""
    dirs = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    git = shutil.which("git")
    for d in dirs:
        if git:
            _run([git, "status"], d)
            _run([git, "-C", str(d), "log"], d)
            _run([git, "st"], d)
        _run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], d)
        _run([sys.executable, "-c", "pass"], d)
        stems = {p.name.split(".")[0] for p in d.iterdir() if not p.name.startswith(".")}
        for stem in sorted(s for s in stems if s.isidentifier()):
            _run([sys.executable, "-c", f"import {stem}"], d)
    if project is not None:  # pytest from a project above: rootdir there, the tree collected
        _run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
              "--rootdir", str(project)], project)  # fmt: skip
    return set(os.listdir(mark)) if mark.is_dir() else set()


def delivered_dirs(notebook: Path) -> Path:
    """The one directory delivery writes beside ``notebook``."""
    return notebook.with_name(f"{notebook.stem}_files")


def extract_control(archive: Path, dest: Path) -> Path:
    """The archive laid out as a live tree, as delivery used to leave it (the control)."""
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(dest)
    return dest
