"""Installing broker: `cmake --install` puts the binary and its manual page under a prefix, the
page names every subcommand and option that `broker --help` lists, and CPack's .deb holds the
same files with the run-time libraries' packages as its dependencies.

The build directory is the one BROKER_BIN was built in (its CMakeCache.txt is beside it).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BROKER_BIN

BUILD_DIR = Path(BROKER_BIN).resolve().parent
SOURCE_DIR = Path(__file__).resolve().parents[2]


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300,
                          **kw)


def help_text(*words):
    r = run(BROKER_BIN, *words, "--help")
    assert r.returncode == 0, r.stderr
    return r.stdout


def subcommands(text):
    """The names under "Subcommands:" in CLI11's help."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and re.match(r"^  (\S+)", line):
            names.append(line.split()[0])
        elif inside and line and not line.startswith(" "):
            inside = False
    return names


def long_options(text):
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", text)) - {"--help"})


def man_text(page):
    """The page's words with roff's escapes for '-' undone."""
    return page.read_text().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "") \
        .replace("\\fI", "")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not (BUILD_DIR / "CMakeCache.txt").exists():
        pytest.fail(f"no CMake build directory beside {BROKER_BIN}")
    root = tmp_path_factory.mktemp("prefix")
    r = run("cmake", "--install", BUILD_DIR, "--prefix", root)
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def test_install_puts_a_working_binary_and_its_manual_page_under_the_prefix(prefix):
    binary = prefix / "bin" / "broker"
    page = prefix / "share" / "man" / "man1" / "broker.1"
    assert binary.is_file() and page.is_file()
    r = run(binary, "--version")
    assert r.returncode == 0 and r.stdout.startswith("broker "), r.stdout + r.stderr
    r = run(binary, "policy", "check", SOURCE_DIR / "examples" / "gateway" / "team-policy.json")
    assert r.returncode == 0, r.stderr


def test_the_manual_page_names_every_subcommand_and_option(prefix):
    page = man_text(prefix / "share" / "man" / "man1" / "broker.1")
    top = subcommands(help_text())
    assert "wrap" in top and "serve" in top and "demo" in top
    missing = []
    for command in top:
        if not re.search(rf"^\.B {re.escape(command)}\b", page, re.M):
            missing.append(command)
        text = help_text(command)
        missing += [f"{command} {o}" for o in long_options(text) if o not in page]
        for sub in subcommands(text):
            if not re.search(rf"\b{re.escape(sub)}\b", page):
                missing.append(f"{command} {sub}")
            missing += [f"{command} {sub} {o}" for o in long_options(help_text(command, sub))
                        if o not in page]
    assert not missing, f"broker.1 does not name: {missing}"


def test_the_deb_holds_the_binary_and_page_and_depends_on_the_libraries(tmp_path):
    if not shutil.which("cpack") or not shutil.which("dpkg-shlibdeps"):
        pytest.fail("cpack and dpkg-shlibdeps (cmake, dpkg-dev) are part of the build's packages")
    r = run("cpack", "--config", BUILD_DIR / "CPackConfig.cmake", "-B", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(tmp_path.glob("broker_*.deb"))
    assert len(debs) == 1, r.stdout
    contents = run("dpkg-deb", "--contents", debs[0]).stdout
    assert "./usr/bin/broker" in contents
    assert "./usr/share/man/man1/broker.1" in contents
    depends = run("dpkg-deb", "--field", debs[0], "Depends").stdout
    for library in ("libssl3", "libseccomp2", "libhiredis0.14", "libspdlog1.10",
                    "libtomlplusplus3", "libc6"):
        assert library in depends, depends
    extracted = tmp_path / "root"
    assert run("dpkg-deb", "--extract", debs[0], extracted).returncode == 0
    r = run(extracted / "usr" / "bin" / "broker", "--version")
    assert r.returncode == 0 and r.stdout.startswith("broker "), r.stderr
