"""The Python client (python/leakproof: the job-side client, its
integrations and pytest plugin, the census, the startup hook, and the
sweep's programs: the prefork template and stub, the Optuna worker) passes
pyflakes: no unused import or variable, no undefined name. Skipped where
pyflakes is not installed (Debian: python3-pyflakes, in scripts/install-deps).
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def test_the_python_client_passes_pyflakes():
    if subprocess.run([PYTHON, "-c", "import pyflakes"], capture_output=True).returncode:
        pytest.skip("no pyflakes (Debian: python3-pyflakes)")
    r = subprocess.run([PYTHON, "-m", "pyflakes", "python/leakproof"], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
