"""
The job's output passes through leakproof unchanged (byte for byte, binary
too, partial last lines too); leakproof's summary goes to stderr after it.
The job learns about its supervision from its environment.
"""
import os
import shlex
import subprocess

import pytest

pytestmark = pytest.mark.valgrind

SUMMARY_WORDS = ("leak", "no-leak", "inconclusive")


def test_binary_stdout_passes_through_byte_exact(lp):
    data = os.urandom(3 << 20) + bytes(range(256)) + b"\r\n\x00no newline at the end"
    src = lp.dir / "blob.bin"
    src.write_bytes(data)
    r = lp.run(["cat", str(src)], "-q")
    assert r.rc == 0, r
    assert r.stdout == data
    assert r.stderr == b""


def shell(lp, line, timeout=120):
    """Run a bash line in the test's directory; `LP` in it is
    `leakproof run -q --store STORE`."""
    lp_run = f"{shlex.quote(lp.binary)} run -q --store {shlex.quote(lp.store)}"
    return subprocess.run(["bash", "-c", line.replace("LP", lp_run)], cwd=lp.dir, env=lp.env(),
                          capture_output=True, timeout=timeout)


def test_output_to_a_file_or_appended_to_one_is_byte_exact(lp):
    """The job's pipe is spliced on to a file without passing through
    leakproof (a file opened O_APPEND included); stderr likewise."""
    data = os.urandom(3 << 20) + b"no newline at the end"
    (lp.dir / "blob.bin").write_bytes(data)
    (lp.dir / "appended.bin").write_bytes(b"before\n")
    r = shell(lp, "LP -- cat blob.bin > out.bin && LP -- cat blob.bin >> appended.bin && "
                  "LP -- sh -c 'cat blob.bin >&2' 2> err.bin")
    assert r.returncode == 0, r
    assert (lp.dir / "out.bin").read_bytes() == data
    assert (lp.dir / "appended.bin").read_bytes() == b"before\n" + data
    assert (lp.dir / "err.bin").read_bytes() == data


@pytest.mark.parametrize("how", ["> both.txt 2>&1", "2>&1 | cat > both.txt"], ids=["file", "pipe"])
def test_stdout_and_stderr_to_one_place_keep_their_order(lp, how):
    """`> log 2>&1` (a batch job's output file) and `2>&1 | tee`: the job's
    lines stay in the order it wrote them. Through two pipes they came out
    in the order leakproof happened to read them (1,777 of 2,000 moved)."""
    code = ("import os\n"
            "for i in range(2000): os.write(1 + i % 2, b'%s %d\\n' % (b'out' if i % 2 == 0 else b'err', i))\n")
    r = shell(lp, f"LP -- {lp.py} -c {shlex.quote(code)} {how}")
    assert r.returncode == 0, r
    lines = (lp.dir / "both.txt").read_text().splitlines()
    want = [f"{'out' if i % 2 == 0 else 'err'} {i}" for i in range(2000)]
    moved = sum(1 for a, b in zip(lines, want) if a != b)
    assert lines == want, f"{moved} of {len(want)} lines out of place; first: {lines[:6]}"


def test_a_reader_that_goes_away_does_not_stop_the_job(lp):
    """`| head`: our stdout is closed; the job's output is still drained,
    so the job runs to its end and its own status is leakproof's."""
    code = ("import sys\n"
            "for i in range(400): sys.stdout.write('x' * 65535 + '\\n')\n"
            "sys.stdout.flush()\n"
            "sys.stderr.write('END\\n')\n"
            "sys.exit(3)\n")
    r = shell(lp, f"LP -- {lp.py} -c {shlex.quote(code)} | head -c 100 > /dev/null; "
                  "echo \"status=${PIPESTATUS[0]}\" >&2")
    assert b"END\n" in r.stderr and b"status=3\n" in r.stderr, r


def test_output_written_in_pieces_passes_through(lp):
    code = ("import os, time\n"
            "for piece in (b'half a li', b'ne\\n', b'\\x00\\xff', b'\\rprogress 50%',"
            " b'\\rprogress 100%', b'\\n', b'last, no newline'):\n"
            "    os.write(1, piece); time.sleep(0.03)\n")
    r = lp.run([lp.py, "-c", code], "-q")
    assert r.rc == 0, r
    assert r.stdout == b"half a line\n\x00\xff\rprogress 50%\rprogress 100%\nlast, no newline"


def test_summary_goes_to_stderr_after_the_jobs_own(lp):
    r = lp.run(["sh", "-c", "printf 'job says hi\\n' >&2; printf 'to stdout'"])
    assert r.rc == 0, r
    assert r.stdout == b"to stdout"
    assert r.stderr.startswith(b"job says hi\n")
    summary = r.stderr[len(b"job says hi\n"):].decode()
    assert summary.strip(), "no summary on stderr"
    assert any(word in summary for word in SUMMARY_WORDS), summary


def test_quiet_prints_no_summary(lp):
    r = lp.run(["sh", "-c", "printf 'e' >&2; printf 'o'"], "-q")
    assert r.rc == 0, r
    assert (r.stdout, r.stderr) == (b"o", b"e")


def test_job_environment(lp):
    r = lp.run(["sh", "-c", 'printf "%s|%s|%s|%s" "$LEAKPROOF_RUN" "$LEAKPROOF_RESTART" '
                '"$PYTHONUNBUFFERED" "$LEAKPROOF_FD"'], "-q",
               env={"PYTHONUNBUFFERED": None})
    assert r.rc == 0, r
    run_id, restart, unbuffered, fd = r.out.split("|")
    assert run_id == str(lp.report()["run"]["id"])
    assert restart == "0"
    assert unbuffered == "1"
    assert fd.isdigit() and int(fd) > 2


def test_pythonunbuffered_set_by_the_user_is_kept(lp):
    r = lp.run(["sh", "-c", 'printf "%s" "$PYTHONUNBUFFERED"'], "-q",
               env={"PYTHONUNBUFFERED": "7"})
    assert (r.rc, r.out) == (0, "7"), r


def test_python_client_is_importable_and_connected(lp):
    r = lp.run([lp.py, "-c", "import os, leakproof; print(leakproof.enabled()); "
                "print(os.environ['PYTHONPATH'])"], "-q",
               env={"PYTHONPATH": "/nonexistent/user/dir"})
    assert r.rc == 0, r
    enabled, pythonpath = r.out.splitlines()
    assert enabled == "True"
    # the census's startup hook (dormant), the client's directory, then the
    # user's path, kept
    parts = pythonpath.split(os.pathsep)
    assert parts[-1] == "/nonexistent/user/dir"
    assert len(parts) == 3 and parts[0] == os.path.join(parts[1], "leakproof", "hook"), parts
