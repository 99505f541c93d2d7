"""Run every C unit test binary (build/t/test_*) as one pytest test each.

The binaries come from `make`; $LEAKPROOF_BUILD selects another build
directory (build-asan for the sanitizer run). $LEAKPROOF_TEST_WRAPPER, when
set (e.g. "valgrind --error-exitcode=99 --leak-check=full"), prefixes each.
"""
import os
import pathlib
import shlex
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / os.environ.get("LEAKPROOF_BUILD", "build")
pytestmark = pytest.mark.valgrind

UNITS = sorted(p.name for p in (ROOT / "t" / "unit").glob("test_*.c"))


@pytest.mark.parametrize("name", [u[:-2] for u in UNITS])
def test_unit(name):
    binary = BUILD / "t" / name
    assert binary.exists(), f"{binary} is missing: run make first"
    env = dict(os.environ)
    env.setdefault("LEAKPROOF_NVML_LIB", str(BUILD / "t" / "libnvidia-ml.so.1"))
    wrapper = shlex.split(os.environ.get("LEAKPROOF_TEST_WRAPPER", ""))
    proc = subprocess.run(wrapper + [str(binary)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
