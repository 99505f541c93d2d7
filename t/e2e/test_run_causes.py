"""
Every end of a job is named, with evidence, and the run is in the store with
its samples up to the end: the kernel's OOM killer under --max-mem (cgroup v1
here; the v2 files are covered by the unit tests), a budget leakproof
enforces itself, the out-of-memory messages of the frameworks, a segfault.
"""
import os

import pytest

ENDS = "ends.py"


def segment(rep, i=-1):
    assert rep["segments"], rep
    return rep["segments"][i]


def in_job_cgroup(lp):
    """Whether leakproof can give the job a memory cgroup here."""
    r = lp.run(["true"], timeout=60)
    assert r.rc == 0, r
    return lp.report()["run"]["cgroup_mode"] != "none"


def test_kernel_oom_kill_under_max_mem(lp):
    if not in_job_cgroup(lp):
        pytest.skip("no writable memory cgroup for the job on this machine")
    r = lp.run([lp.py, lp.workload(ENDS), "hog", "8"], "--max-mem", "200M", timeout=60)
    assert r.rc == 137, r
    assert "enforced by the kernel" in r.err, r
    rep = lp.report()
    g = segment(rep)
    assert g["cause"] == "oom-kill", g
    assert "oom_kill" in g["evidence"]
    assert g["step"] >= 10
    # the samples go up to the end: the last memory is near the budget
    assert 150 * lp.MIB < g["memory_bytes"] <= 210 * lp.MIB, g
    assert rep["peak_bytes"] > 150 * lp.MIB
    # the summary says it in words, with the process that held the most
    assert "oom-kill" in r.err and "most memory: pid" in r.err
    assert rep["top_process"]["pss_bytes"] > 100 * lp.MIB, rep["top_process"]


@pytest.mark.valgrind
def test_budget_enforced_by_polling_without_cgroup(lp):
    r = lp.run([lp.py, lp.workload(ENDS), "hog", "8"], "--max-mem", "200M", "--no-cgroup",
               "--interval", "10ms", timeout=60)
    assert r.rc == 137, r
    assert "enforced by leakproof" in r.err, r
    g = segment(lp.report())
    assert g["cause"] == "budget-kill", g
    assert "over the budget of 200 MiB" in g["evidence"]
    # polled every 10 ms while memory grows 8 MiB per 20 ms: caught soon after
    assert g["memory_bytes"] < 260 * lp.MIB, g


OOM_LINES = {
    "pytorch-cuda": ("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                 "20.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 3.12 MiB is free."),
    "tensorflow": ("cuda-oom", "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
                               "allocating tensor with shape[1024,1024,256] and type float on "
                               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"),
    "jax": ("cuda-oom", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                        "trying to allocate 17179869184 bytes."),
    "theano": ("cuda-oom", "Error allocating 4294967296 bytes of device memory (out of memory). "
                           "Driver report 123 bytes free and 456 bytes total"),
    "memoryerror": ("host-alloc-fail", "MemoryError"),
    "numpy": ("host-alloc-fail", "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB "
                                 "for an array with shape (1000000000,) and data type float64"),
    "enomem": ("host-alloc-fail", "OSError: [Errno 12] Cannot allocate memory"),
    "bad-alloc": ("host-alloc-fail", "terminate called after throwing an instance of 'std::bad_alloc'"),
}


# One message of each cause under valgrind too: the others take the same
# path through the supervisor with another line.
VALGRIND_TOO = {"pytorch-cuda", "enomem"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.valgrind) if n in VALGRIND_TOO else n
                                  for n in sorted(OOM_LINES)])
def test_framework_out_of_memory_messages(lp, name):
    cause, line = OOM_LINES[name]
    r = lp.run([lp.py, lp.workload(ENDS), "say", "1", "Traceback (most recent call last):",
                '  File "train.py", line 42, in <module>', line], timeout=60)
    assert r.rc == 1, r
    assert line in r.err   # the job's stderr passes through unchanged
    g = segment(lp.report())
    assert g["cause"] == cause, g
    assert line[:60] in g["evidence"], g
    assert f"ends      {cause}" in r.err   # the summary says it


def test_message_then_clean_exit_is_an_exit(lp):
    # a batch-size search catches the OOM and goes on: not a failure
    r = lp.run([lp.py, lp.workload(ENDS), "say", "0", "RuntimeError: CUDA out of memory."], timeout=60)
    assert r.rc == 0, r
    assert segment(lp.report())["cause"] == "exit"


@pytest.mark.valgrind
def test_plain_error_and_segfault(lp):
    r = lp.run([lp.py, lp.workload(ENDS), "say", "3", "ValueError: bad config"], timeout=60)
    assert r.rc == 3, r
    g = segment(lp.report())
    assert (g["cause"], g["evidence"]) == ("error", "exited 3"), g

    r = lp.run([lp.py, lp.workload(ENDS), "segv"], timeout=60)
    assert r.rc == 128 + 11, r
    rep = lp.report()
    g = segment(rep)
    assert g["cause"] == "crash", g
    assert "SIGSEGV" in g["evidence"]
    assert rep["samples"] >= 1 and g["step"] == 1


def test_signal_from_outside(lp):
    r = lp.run(["sh", "-c", "kill -USR1 $$"], timeout=60)
    assert r.rc == 128 + 10, r
    g = segment(lp.report())
    assert (g["cause"], g["evidence"]) == ("signal", "killed by SIGUSR1"), g


@pytest.mark.parametrize("args,message", [
    (["--max-mem", "lots"], "invalid size 'lots'"),
    (["--max-mem", "12Q"], "unknown unit 'Q'"),
    (["--max-mem", "150%"], "'150%'"),
    (["--max-gpu", "-1G"], "invalid size '-1G'"),
    (["--soft-limit", "90%"], "percentage of --max-mem, which is not set"),
    (["--max-mem", "100M", "--soft-limit", "200M"], "at most --max-mem"),
    (["--restart", "sometimes"], "unknown --restart policy 'sometimes'"),
    (["--restart", "every=0"], "every=N needs a whole number"),
    (["--restart", "at-limit"], "--restart at-limit needs a budget"),
    (["--max-restarts", "many"], "--max-restarts 'many'"),
    (["--stop-signal", "SIGNOPE"], "--stop-signal 'SIGNOPE'"),
    (["--grace", "soon"], "invalid duration 'soon'"),
    (["--max-mem", "1"], "--max-mem '1' is below 1M"),
    (["--max-gpu", "512K"], "--max-gpu '512K' is below 1M"),
    (["--max-mem", "1G", "--soft-limit", "4K"], "at least 1M"),
    (["--max-mem", "0x10G"], "write a plain decimal number"),
    (["--max-mem", "1e3M"], "write a plain decimal number"),
    (["--stop-signal", "STOP"], "cannot ask the job to stop"),
    (["--stop-signal", "KILL"], "cannot ask the job to stop"),
    (["--stop-signal", "SIGCONT"], "cannot ask the job to stop"),
    (["--stop-signal", "TSTP"], "cannot ask the job to stop"),
])
def test_bad_budget_options(lp, args, message):
    r = lp.run(["true"], *args, timeout=30)
    assert r.rc == 124, r
    assert message in r.err, r
    assert not os.path.exists(lp.store), "a usage error must not create a store"
