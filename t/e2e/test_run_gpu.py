"""
GPU memory through NVML, on machines without a GPU: leakproof loads the fake
libnvidia-ml that the build makes (t/fake-nvml, chosen with the documented
LEAKPROOF_NVML_LIB), and the job says how much "GPU memory" it holds by
writing the fake's file. --measure gpu judges it; --max-gpu enforces it.
"""
import pytest


@pytest.fixture
def gpu_env(lp):
    lib = lp.binary_dir / "t" / "libnvidia-ml.so.1"
    assert lib.is_file(), f"the fake NVML library is not built: {lib} (make builds it)"
    return {"LEAKPROOF_NVML_LIB": str(lib), "FAKE_NVML_FILE": str(lp.dir / "nvml.txt")}


@pytest.mark.valgrind
def test_measure_gpu_finds_a_gpu_leak(lp, gpu_env):
    r = lp.run([lp.py, lp.workload("fake_gpu.py"), "120", "2048", "8"], "--measure", "gpu",
               "--interval", "20ms", env=gpu_env, timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["measure"] == "gpu"
    assert rep["verdict"] == "leak", lp.describe(rep)
    want = lp.expected_growth(r.stderr)
    assert abs(rep["growth_bytes_per_step"] - want) <= 0.1 * want, lp.describe(rep)
    assert rep["peak_bytes"] >= (2048 + 8 * 110) * lp.MIB
    # host memory of the same run is judged separately: a Python loop, flat
    assert lp.report(measure="pss")["verdict"] != "leak"


def test_gpu_memory_is_in_the_one_judgment(lp, gpu_env):
    """Without --measure, a job whose host memory is flat while its GPU
    memory grows is a leak in the headline, judged on host and GPU memory
    together (measure pss+gpu), never no-leak above a diagnosis of a GPU
    leak (seen on an H200: "verdict no-leak" over "diagnosis leak — GPU
    memory … grows 31.2 MiB per step"). report --measure pss asks for the
    host alone."""
    r = lp.run([lp.py, lp.workload("fake_gpu.py"), "120", "1024", "8"], "--interval", "20ms",
               env=gpu_env, timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["measure"] == "pss" and rep["measure_judged"] == "pss+gpu", lp.describe(rep)
    assert rep["verdict"] == "leak", lp.describe(rep)
    want = lp.expected_growth(r.stderr)
    assert abs(rep["growth_bytes_per_step"] - want) <= 0.15 * want, lp.describe(rep)
    assert rep["peak_bytes"] >= (1024 + 8 * 100) * lp.MIB
    assert "measure pss+gpu" in r.err, r.err
    host = lp.report(measure="pss")
    assert host["measure_judged"] == "pss" and host["verdict"] != "leak", lp.describe(host)


def test_measure_gpu_flat(lp, gpu_env):
    r = lp.run([lp.py, lp.workload("fake_gpu.py"), "100", "4096", "0"], "--measure", "gpu",
               "--interval", "20ms", env=gpu_env, timeout=120)
    assert r.rc == 0, r
    rep = lp.report()
    assert rep["verdict"] == "no-leak", lp.describe(rep)


def test_max_gpu_kills_over_budget(lp, gpu_env):
    r = lp.run([lp.py, lp.workload("fake_gpu.py"), "400", "1024", "32"], "--max-gpu", "2G",
               "--interval", "10ms", env=gpu_env, timeout=120)
    assert r.rc == 137, r
    assert "GPU memory budget 2.00 GiB" in r.err, r
    g = lp.report()["segments"][-1]
    assert g["cause"] == "budget-kill", g
    assert g["evidence"].startswith("GPU memory") and "over the budget of 2.00 GiB" in g["evidence"], g
    # 1 GiB + 32 MiB a step (20 ms) crosses 2 GiB at step 32; polled every
    # 10 ms, and the kill lands before a few more steps
    assert 30 <= g["step"] <= 40, g


def test_max_gpu_without_nvml_says_so(lp):
    r = lp.run(["true"], "--max-gpu", "2G", env={"LEAKPROOF_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"},
               timeout=60)
    assert r.rc == 0, r
    assert "not available: not enforced" in r.err, r
