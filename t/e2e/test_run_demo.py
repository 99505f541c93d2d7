"""
The bundled demo, examples/leaky_train.py, says what examples/README.md
promises: the leaky loop is a leak of over 1 MiB per step, the fixed one is
not, and --step-regex on its "Epoch N/M" lines finds its epochs. With
`--expect no-leak` (the gate of CI jobs): the leaky one breaks it, exit 123,
the summary saying so; the fixed one holds it.
"""
import pytest

# The three may run beside each other and beside other PyTorch jobs: the
# pages of the libraries they all map are not the job's to gain or lose
# (docs/internals/sampler.md, "Sharing with processes outside the tree").
pytestmark = pytest.mark.slow

DEMO = "examples/leaky_train.py"


def demo(lp):
    return str(lp.repo / DEMO)


def test_demo_leaks(lp):
    r = lp.run([lp.py, demo(lp)], "--expect", "no-leak", timeout=180)
    assert r.rc == 123, r
    assert "Epoch 10/10" in r.out
    assert "verdict   leak" in r.err, r.err
    assert "expect    no-leak: broken" in r.err and "per step" in r.err, r.err
    assert "broke 1 memory expectation (exit 123)" in r.err, r.err
    rep = lp.report()
    assert rep["steps"] == 800
    assert rep["verdict"] == "leak", lp.describe(rep)
    assert rep["growth_bytes_per_step"] > lp.MIB, lp.describe(rep)


def test_demo_fixed_does_not_leak(lp):
    r = lp.run([lp.py, demo(lp), "--fixed"], "--expect", "no-leak", timeout=180)
    assert r.rc == 0, r
    assert "expect    no-leak: held" in r.err, r.err
    rep = lp.report()
    assert rep["steps"] == 800
    assert rep["verdict"] == "no-leak", lp.describe(rep)


def test_demo_epochs_from_step_regex(lp):
    r = lp.run([lp.py, demo(lp), "--fixed", "--epochs", "3", "--steps-per-epoch", "10"],
               "--step-regex", r"^Epoch (\d+)/", timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["run"]["step_source"] == "regex"
    assert rep["steps"] == 3
