"""
The job's output passes through leakproof unchanged (byte for byte, binary
too, partial last lines too); leakproof's summary goes to stderr after it.
The job learns about its supervision from its environment.
"""
import os

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
    # the client's directory comes first; the user's path is kept after it
    assert pythonpath.split(os.pathsep)[-1] == "/nonexistent/user/dir"
    assert len(pythonpath.split(os.pathsep)) == 2
