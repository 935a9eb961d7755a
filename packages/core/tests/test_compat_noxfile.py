"""The nox sessions that install ember share one build of the core (issue 15 item 13): the first
session builds a wheel of the current sources, later sessions only reinstall it. Checked with a
stand-in for nox's Session (a real double build takes many minutes)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("nox")

ROOT = Path(__file__).resolve().parents[3]


@functools.lru_cache(maxsize=1)  # nox registers sessions on import: load the file once
def _noxfile():
    spec = importlib.util.spec_from_file_location("ember_noxfile", ROOT / "noxfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeSession:
    def __init__(self):
        self.installs: list[tuple] = []
        self.builds = 0

    def install(self, *args, **kwargs):
        self.installs.append(args)

    def run(self, *args, **kwargs):
        assert args[:4] == ("python", "-m", "pip", "wheel")
        self.builds += 1
        out = Path(args[args.index("-w") + 1])
        out.mkdir(parents=True, exist_ok=True)
        import sys

        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        (out / f"ember_core-0.1.0-{tag}-{tag}-linux_x86_64.whl").write_bytes(b"wheel")

    def log(self, msg):
        pass


def test_second_session_reuses_the_core_build(tmp_path, monkeypatch):
    nf = _noxfile()
    monkeypatch.setattr(nf, "CORE_WHEEL_CACHE", tmp_path)
    tests_session, demo_session = FakeSession(), FakeSession()
    nf.install_core(tests_session)  # `nox -s tests`
    nf.install_core(demo_session)  # then `nox -s demo`
    assert tests_session.builds == 1 and demo_session.builds == 0
    wheel = next(tmp_path.rglob("*.whl"))
    assert any(str(wheel) in a for a in demo_session.installs)
    # the demo session needs no compiler toolchain either
    assert not any("cmake" in a for a in demo_session.installs)


def test_changed_sources_rebuild(tmp_path, monkeypatch):
    nf = _noxfile()
    monkeypatch.setattr(nf, "CORE_WHEEL_CACHE", tmp_path)
    nf.install_core(FakeSession())
    monkeypatch.setattr(nf, "_core_source_key", lambda: "changed")
    s = FakeSession()
    nf.install_core(s)
    assert s.builds == 1


def test_the_key_covers_the_core_sources():
    nf = _noxfile()
    key = nf._core_source_key()
    assert key == nf._core_source_key() and len(key) == 16
    for entry in nf.CORE_SOURCES:
        assert (ROOT / entry).exists(), entry
    for session in ("tests", "demo", "bench"):
        assert "install_all(session)" in (ROOT / "noxfile.py").read_text().split(
            f"def {session}(")[1].split("@nox.session")[0]
