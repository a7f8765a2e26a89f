"""Issue 21: libpolarsplit installs like a system library.

`scripts/install.sh` into a temporary prefix, then C programs built *only* from the installed
files (header, pkg-config metadata, libraries) and run under the dynamic loader with no
LD_LIBRARY_PATH: the loader finds `libpolarsplit.so.<ABI>` through the rpath the program was
linked with (the prefix's libdir, taken from pkg-config), never through the build tree. The ABI
number is read from Cargo.toml, never assumed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()

PROGRAM = r"""
#include <polarsplit.h>
#include <stdio.h>
#include <string.h>

/* A real use of the installed library: build a configuration, an engine and a session, feed a
 * client StartupMessage and expect the engine to ask for a writer connection. */
int main(void) {
    if (polarsplit_abi_version() != POLARSPLIT_ABI_VERSION) {
        fprintf(stderr, "abi %u != %u\n", polarsplit_abi_version(), POLARSPLIT_ABI_VERSION);
        return 1;
    }
    char err[256] = "";
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    if (!b || polarsplit_config_builder_set(b, "server_dialect", "stock", err, sizeof err) != POLARSPLIT_OK ||
        polarsplit_config_builder_set(b, "startup_profile", "off", err, sizeof err) != POLARSPLIT_OK) {
        fprintf(stderr, "set: %s\n", err);
        return 1;
    }
    polarsplit_config *cfg = NULL;
    polarsplit_engine *eng = NULL;
    polarsplit_session *s = NULL;
    if (polarsplit_config_builder_build(b, &cfg, err, sizeof err) != POLARSPLIT_OK ||
        polarsplit_engine_new(cfg, &eng) != POLARSPLIT_OK || polarsplit_session_new(eng, NULL, 0, &s) != POLARSPLIT_OK) {
        fprintf(stderr, "setup: %s\n", err);
        return 1;
    }
    static const char params[] = "user\0app\0database\0app\0";
    unsigned char pkt[64];
    size_t n = 8 + sizeof params; /* params end with the extra NUL of the string literal */
    pkt[0] = 0; pkt[1] = 0; pkt[2] = 0; pkt[3] = (unsigned char)n;
    pkt[4] = 0; pkt[5] = 3; pkt[6] = 0; pkt[7] = 0;
    memcpy(pkt + 8, params, sizeof params);
    size_t consumed = 0;
    if (polarsplit_session_recv_client(s, pkt, n, 0, &consumed) != POLARSPLIT_OK || consumed != n) return 1;
    polarsplit_action a;
    int connect = 0;
    while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
        if (a.kind == POLARSPLIT_ACTION_CONNECT_WRITER && a.connect_writer.startup.len > 8) connect++;
    polarsplit_session_free(s);
    polarsplit_engine_free(eng);
    polarsplit_config_free(cfg);
    printf("polarsplit %s abi %u connect_writer %d\n", polarsplit_version(), polarsplit_abi_version(), connect);
    return connect == 1 ? 0 : 1;
}
"""


def abi_version() -> int:
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[package.metadata.polarsplit]", 1)[1]
    return int(re.search(r"^abi-version\s*=\s*(\d+)", section, re.M).group(1))


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LIBRARY_PATH", "C_INCLUDE_PATH", "CPATH")}
    env.update(extra)
    return env


def run(cmd: list[str], **kw) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """A temporary prefix, installed into through DESTDIR staging and then used in place."""
    root = tmp_path_factory.mktemp("install")
    p = root / "opt" / "polarsplit"
    run(["bash", str(ROOT / "scripts" / "install.sh"), "--no-build"], cwd=ROOT,
        env=clean_env(PREFIX=str(p)))
    return p


def pkg_config(prefix: Path, *args: str) -> list[str]:
    env = clean_env(PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    return run(["pkg-config", *args, "polarsplit"], env=env).split()


def test_install_layout_has_soname_links_static_lib_header_and_pc(prefix):
    abi = abi_version()
    lib = prefix / "lib"
    so = lib / f"libpolarsplit.so.{abi}"
    assert so.is_symlink() and so.resolve().is_file()
    assert (lib / "libpolarsplit.so").resolve() == so.resolve()
    assert (lib / "libpolarsplit.a").is_file()
    assert (prefix / "include" / "polarsplit.h").read_text() == (ROOT / "include" / "polarsplit.h").read_text()
    soname = re.search(r"SONAME\s+(\S+)", run(["objdump", "-p", str(so.resolve())])).group(1)
    assert soname == f"libpolarsplit.so.{abi}"
    assert pkg_config(prefix, "--modversion") == [re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)]
    assert pkg_config(prefix, "--variable=abi_version") == [str(abi)]
    assert pkg_config(prefix, "--cflags") == [f"-I{prefix}/include"]
    assert pkg_config(prefix, "--libs") == [f"-L{lib}", "-lpolarsplit"]


def test_destdir_stages_without_changing_the_pc_paths(tmp_path):
    run(["bash", str(ROOT / "scripts" / "install.sh"), "--no-build"], cwd=ROOT,
        env=clean_env(PREFIX="/usr/lib/polarsplit-test", DESTDIR=str(tmp_path)))
    pc = (tmp_path / "usr/lib/polarsplit-test/lib/pkgconfig/polarsplit.pc").read_text()
    assert "prefix=/usr/lib/polarsplit-test\n" in pc
    assert str(tmp_path) not in pc
    assert (tmp_path / f"usr/lib/polarsplit-test/lib/libpolarsplit.so.{abi_version()}").is_symlink()


def test_c_program_from_installed_files_runs_under_the_loader(prefix, tmp_path):
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "prog"
    libdir = pkg_config(prefix, "--variable=libdir")[0]
    # Only the prefix: pkg-config's flags, an rpath to its libdir, no -I/-L into the source tree.
    flags = pkg_config(prefix, "--cflags", "--libs")
    assert not any(str(ROOT) in f for f in flags)
    run(["cc", "-std=c11", "-Wall", "-Werror", "-o", str(exe), str(src), *flags, f"-Wl,-rpath,{libdir}"],
        env=clean_env(), cwd=tmp_path)
    out = run([str(exe)], env=clean_env(), cwd=tmp_path)
    assert f"abi {abi_version()} connect_writer 1" in out
    # The loader resolved the SONAME inside the prefix, not in the build tree.
    ldd = run(["ldd", str(exe)], env=clean_env())
    line = next(l for l in ldd.splitlines() if "libpolarsplit" in l)
    assert f"libpolarsplit.so.{abi_version()} => {libdir}/" in line, ldd
    assert str(TARGET) not in ldd


def test_c_program_links_the_installed_static_library(prefix, tmp_path):
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "prog-static"
    libdir = pkg_config(prefix, "--variable=libdir")[0]
    libs = [f for f in pkg_config(prefix, "--static", "--libs") if f not in ("-lpolarsplit",) and not f.startswith("-L")]
    run(["cc", "-std=c11", "-o", str(exe), str(src), *pkg_config(prefix, "--cflags"), f"{libdir}/libpolarsplit.a", *libs],
        env=clean_env(), cwd=tmp_path)
    assert "libpolarsplit" not in run(["ldd", str(exe)], env=clean_env())
    assert f"abi {abi_version()} connect_writer 1" in run([str(exe)], env=clean_env())
