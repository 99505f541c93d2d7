"""The stub of a sweep's warm start (docs/internals/prefork.md): the job
`leakproof run` supervises in place of the trial's command.

    PYTHON -E -S DIR/stub.py COMMAND...

The template (_prefork.py) copies this file beside its socket, DIR/sock.
The stub asks the template to fork the trial with the stub's argv[1:],
working directory, environment and descriptors, or, when it answers
{"cold": WHY} or is not there, says why on stderr and execs COMMAND itself.
While the fork runs, the signals in FORWARD sent to the stub alone reach
the fork: the stub blocks them and a thread takes each (sigwaitinfo) and
sends it on, unless it came from the supervisor (the stub's parent) with
kill(), which is how the supervisor signals the job's process group, the
fork included (one signal, never two); the supervisor's stop signal to the
job's pid is sent with sigqueue() (si_code SI_QUEUE) and is forwarded. The
stub then ends as the fork ended: the same exit status, or death by the
same signal.

It imports the C modules, not json, signal, socket, threading: those import
re and enum, which took most of the stub's start (about 20 ms against 9).
Nothing here runs on import: the tests import it as leakproof._prefork_stub.
"""

import _json
import _signal
import _socket
import _thread
import os
import struct
import sys

FORWARD = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGUSR1, _signal.SIGUSR2)
SI_USER = 0    # kill(); sigqueue() is SI_QUEUE


def cold(why, argv):
    os.write(2, ('leakproof: prefork: cold start: %s\n' % why).encode())
    os.execvp(argv[0], argv)


def enc(v):
    """JSON as json.dumps writes it (ASCII; a lone surrogate as \\udcXX)."""
    if isinstance(v, str):
        return _json.encode_basestring_ascii(v)
    if isinstance(v, dict):
        return '{' + ', '.join(enc(k) + ': ' + enc(x) for k, x in v.items()) + '}'
    if isinstance(v, list):
        return '[' + ', '.join(enc(x) for x in v) + ']'
    return str(int(v))


def parse_answer(line):
    """An answer of the template, b'{"KEY": NUMBER}' or b'{"KEY": "TEXT"}',
    as (KEY, VALUE); ValueError when it is not one."""
    text = line.decode().strip()
    if not (text.startswith('{"') and text.endswith('}')):
        raise ValueError('not an answer: %r' % text[:80])
    key, _, value = text[1:-1].partition(':')
    key, value = key.strip()[1:-1], value.strip()
    return key, _json.scanstring(value, 1)[0] if value.startswith('"') else int(value)


class Answers:
    """The template's answers on the socket s, one a line."""

    def __init__(self, s):
        self.s = s
        self.buf = b''

    def next(self):
        """The next answer as (KEY, VALUE); ValueError when there is none or it is not one."""
        while b'\n' not in self.buf:
            more = self.s.recv(4096)
            if not more:
                raise ValueError('the template ended')
            self.buf += more
        line, _, self.buf = self.buf.partition(b'\n')
        return parse_answer(line)


def open_fds(but):
    """The descriptors open in this process, but the one given, in order."""
    fds = []
    for f in os.listdir('/proc/self/fd'):
        fd = int(f)
        if fd != but:
            try:
                os.fstat(fd)
                fds.append(fd)
            except OSError:
                pass
    fds.sort()
    return fds


def main(path, argv):
    """Run argv through the template at the socket path; never returns."""
    try:
        # through a descriptor of the socket's directory: its path may be
        # longer than the 107 bytes a socket's address holds
        d = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.connect('/proc/self/fd/%d/%s' % (d, os.path.basename(path)))
        finally:
            os.close(d)
    except OSError as e:
        cold('no template at %s (%s)' % (path, e.strerror), argv)
    fds = open_fds(s.fileno())
    req = enc({'argv': argv, 'cwd': os.getcwd(), 'env': dict(os.environ), 'fds': fds,
               'pid': os.getpid()}).encode()
    _signal.signal(_signal.SIGQUIT, _signal.SIG_IGN)
    old_mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, FORWARD)
    answers = Answers(s)
    try:
        data = struct.pack('I', len(req)) + req
        sent = s.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack('%di' % len(fds), *fds))])
        if sent < len(data):
            s.sendall(data[sent:])
        key, first = answers.next()
    except (OSError, ValueError) as e:
        key, first = 'cold', 'the template did not answer (%s)' % e
    if key != 'pid':
        s.close()
        _signal.signal(_signal.SIGQUIT, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, old_mask)
        cold(first if key == 'cold' else 'the template answered %r' % key, argv)
    pid = first
    parent = os.getppid()
    main_thread = _thread.get_ident()

    def forward():
        while True:
            si = _signal.sigwaitinfo(FORWARD)
            if si.si_pid == parent and si.si_code == SI_USER:
                continue    # the supervisor signalled the job's group: the fork has it already
            try:
                os.kill(pid, si.si_signo)
            except OSError:
                pass

    _thread.start_new_thread(forward, ())
    try:
        key, status = answers.next()
        if key != 'status':
            raise ValueError(key)
    except (OSError, ValueError):
        os.write(2, b'leakproof: prefork: the template ended before the trial did\n')
        try:
            os.kill(pid, _signal.SIGKILL)
        except OSError:
            pass
        os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            _signal.signal(sig, _signal.SIG_DFL)
        except (OSError, ValueError):
            pass    # SIGKILL, SIGSTOP: default always
        _signal.pthread_kill(main_thread, sig)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == '__main__':
    main(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sock'), sys.argv[1:])
