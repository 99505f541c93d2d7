"""The template process of a sweep's warm starts (docs/internals/prefork.md).

    PYTHON DIR/leakproof/_prefork.py MODULE...

Started by `leakproof sweep` (src/sweep/prefork.c) with the trials' Python,
as a script and not with -m: -m would import the leakproof package first,
and every forked trial would then find it imported with the template's
environment instead of its own. It imports MODULE..., checks that a fork of
it is safe, copies the stub (_prefork_stub.py) beside a new unix socket as
stub.py, then prints "ready SOCKET" (or "refuse: WHY") on stdout and
serves until SIGTERM: a request is a 4-byte length and a JSON object
{argv, cwd, env, fds, pid} with the stub's descriptors attached; the answer
a line {"cold": WHY}, or {"pid": N} and, when the fork ends, {"status":
WAIT_STATUS}. The stub's connection closing kills the fork.

Nothing here runs on import: the tests import it as leakproof._prefork.
"""

import gc
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile

# variables read at import time: a trial whose value differs starts cold
PREFIXES = ('OMP_', 'MKL_', 'OPENBLAS_', 'GOTO_', 'KMP_', 'BLIS_', 'VECLIB_', 'NUMEXPR_', 'TF_', 'TORCH_',
            'PYTORCH_', 'XLA_', 'JAX_', 'CUDA_', 'NCCL_', 'MALLOC_', 'GLIBC_TUNABLES', 'LD_', 'PYTHON')
# ... except these, applied in the fork (or read only when CUDA starts)
APPLIED = ('PYTHONPATH', 'PYTHONUNBUFFERED', 'CUDA_VISIBLE_DEVICES')
ACCELERATORS = ('/dev/nvidia', '/dev/dri', '/dev/kfd', '/dev/accel')
STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_prefork_stub.py')


def say(text):
    os.write(1, (text + '\n').encode())


def import_all(modules):
    """Import each of modules; None, or why one failed."""
    import importlib
    mod = None
    try:
        for mod in modules:
            importlib.import_module(mod)
    except BaseException as e:
        return 'importing %s failed: %s: %s' % (mod, type(e).__name__, e)
    return None


def unsafe():
    """Why a fork of this process would not be a sound trial, or None."""
    me = str(os.getpid())
    tasks = [t for t in os.listdir('/proc/self/task') if t != me]
    if tasks:
        names = sorted(open('/proc/self/task/%s/comm' % t).read().strip() for t in tasks)
        return ('the template runs %d more thread(s) after the imports (%s), which a fork would not '
                'carry over' % (len(tasks), ', '.join(names)))
    torch = sys.modules.get('torch')
    if torch is not None and torch.cuda.is_initialized():
        return 'CUDA is initialised in the template after the imports'
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink('/proc/self/fd/' + fd)
        except OSError:
            continue
        if target.startswith(ACCELERATORS):
            return 'an accelerator (%s) is open in the template after the imports' % target
    return None


def cgroups(pid):
    """{controllers: path} of pid, from /proc/PID/cgroup (v2's controllers: '')."""
    out = {}
    for line in open('/proc/%d/cgroup' % pid):
        hid, ctrl, p = line.rstrip('\n').split(':', 2)
        out[ctrl] = p
    return out


def cgroup_files(stub):
    """The cgroup.procs files that move a process into stub's cgroups, or a reason why not."""
    mounts = {}
    for line in open('/proc/self/mountinfo'):
        pre, post = line.split(' - ', 1)
        pre, post = pre.split(), post.split()
        if post[0] == 'cgroup2':
            mounts[''] = (pre[4], pre[3])
        elif post[0] == 'cgroup':
            for o in post[2].split(','):
                mounts[o] = (pre[4], pre[3])
    mine, theirs = cgroups(os.getpid()), cgroups(stub)
    files = []
    for ctrl, p in theirs.items():
        if mine.get(ctrl) == p:
            continue
        m = mounts.get(ctrl.split(',')[0])
        if not m:
            continue
        mnt, root = m
        rel = p[len(root):] if root != '/' and p.startswith(root) else p
        f = os.path.join(mnt, rel.lstrip('/'), 'cgroup.procs')
        if not os.access(f, os.W_OK):
            return None, 'cannot move a process into the trial\'s cgroup (%s not writable)' % f
        files.append(f)
    if not files:
        return None, ('the trial has no cgroup of its own, so its supervisor would not see a '
                      'forked process')
    return files, None


def check(req, env0, exe, modules):
    """Why the trial of req cannot be forked from a template that runs the
    Python exe and imported modules with the environment env0, or None."""
    argv, env = req['argv'], req['env']
    found = shutil.which(argv[0], path=env.get('PATH', os.defpath)) if '/' not in argv[0] else argv[0]
    if not found or os.path.realpath(found) != exe:
        return 'the command\'s Python (%s) is not the template\'s (%s)' % (argv[0], exe)
    if len(argv) < 2 or (argv[1].startswith('-') and argv[1] != '-m') or (argv[1] == '-m' and len(argv) < 3):
        return 'the command is not PYTHON SCRIPT ... or PYTHON -m MODULE ...'
    for name in sorted(set(env) | set(env0)):
        if name.startswith(PREFIXES) and name not in APPLIED and env.get(name) != env0.get(name):
            return ('%s is %s for the trial but %s in the template, which imported %s with it'
                    % (name, repr(env[name]) if name in env else 'unset',
                       repr(env0[name]) if name in env0 else 'unset', ', '.join(modules)))
    return None


def reseed():
    """Seed what a fresh interpreter seeds at its start, which a fork would carry over from
    the template (every trial drawing the same numbers): random (also done by its own fork
    handler), numpy's global RandomState, torch's CPU generator. CUDA's generators are seeded
    when CUDA starts, in the trial. The hash seed cannot change in a running interpreter."""
    import random
    random.seed()
    nr = sys.modules.get('numpy.random')
    if nr is not None:
        nr.seed()
    torch = sys.modules.get('torch')
    if torch is not None and hasattr(torch, 'default_generator'):
        torch.default_generator.seed()


def run_trial(req, fds, files):
    """In the fork: become the trial of req (the stub's descriptors fds, to
    be put at the numbers req['fds']; the cgroup.procs files to join), run
    its script or module as __main__, and _exit as Python would. Never
    returns."""
    code = 1
    try:
        os.setpgid(0, os.getpgid(req['pid']))
        for f in files:
            with open(f, 'w') as fh:
                fh.write(str(os.getpid()))
        high = [os.dup(fd) for fd in fds]
        keep = set(req['fds'])
        for h, target in zip(high, req['fds']):
            os.dup2(h, target, inheritable=True)
        for fd in os.listdir('/proc/self/fd'):
            if int(fd) not in keep:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        os.chdir(req['cwd'])
        os.environ.clear()
        os.environ.update(req['env'])
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        reseed()
        import io
        unbuf = bool(os.environ.get('PYTHONUNBUFFERED'))
        sys.stdin = io.open(0, 'r', closefd=False)
        sys.stdout = io.open(1, 'w', closefd=False, buffering=1 if os.isatty(1) else -1)
        sys.stderr = io.open(2, 'w', closefd=False, buffering=1, errors='backslashreplace')
        if unbuf:
            sys.stdout.reconfigure(write_through=True, line_buffering=True)
        sys.stderr.reconfigure(write_through=True)
        extra = [p for p in os.environ.get('PYTHONPATH', '').split(':') if p and p not in sys.path]
        argv = req['argv']
        import runpy
        if argv[1] == '-m':
            sys.argv = [argv[2]] + argv[3:]
            sys.path[0:1] = [os.getcwd()] + extra
            runpy.run_module(argv[2], run_name='__main__', alter_sys=True)
        else:
            sys.argv = argv[1:]
            sys.path[0:1] = [os.path.dirname(os.path.abspath(argv[1]))] + extra
            runpy.run_path(argv[1], run_name='__main__')
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        import traceback
        traceback.print_exc()    # as a cold interpreter prints it before it dies of SIGINT
        code = -signal.SIGINT
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    try:
        import threading
        import atexit
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xff)


def recv_request(conn):
    """A stub's request from conn: (the JSON object, the descriptors attached).
    ValueError when it is cut short."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 256)
    if len(data) < 4:
        for fd in fds:
            os.close(fd)
        raise ValueError('short request')
    n = struct.unpack('I', data[:4])[0]
    data = data[4:]
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            for fd in fds:
                os.close(fd)
            raise ValueError('short request')
        data += more
    return json.loads(data), fds


def send_line(conn, obj):
    conn.sendall((json.dumps(obj) + '\n').encode())


class Template:
    """The serving part: a listening socket, the forks running, the stubs
    they belong to."""

    def __init__(self, srv, modules):
        self.srv = srv
        self.modules = modules
        self.env0 = dict(os.environ)
        self.exe = os.path.realpath(sys.executable)
        self.sel = selectors.DefaultSelector()
        self.sel.register(srv, selectors.EVENT_READ, None)
        # fork -> [its stub, stopped by us]: SIGSTOP cannot be caught, so a stub stopped
        # (SIGSTOP, SIGTSTP) is seen in its /proc state, and its fork stopped with it
        self.active = {}

    def serve(self, conn):
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize('3i'))
        peer, uid, _ = struct.unpack('3i', cred)
        if uid != os.getuid():
            conn.close()
            return
        conn.settimeout(30)
        fds = []
        try:
            req, fds = recv_request(conn)
            if req.get('pid') != peer:
                raise ValueError('the request is not from its sender')
            why = check(req, self.env0, self.exe, self.modules)
            files = None
            if not why:
                files, why = cgroup_files(peer)
            if why:
                send_line(conn, {'cold': why})
                conn.close()
                return
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                run_trial(req, fds, files)
            send_line(conn, {'pid': pid})
            pidfd = os.pidfd_open(pid)
            self.active[pid] = [peer, False]
            self.sel.register(pidfd, selectors.EVENT_READ, ('child', pid, conn))
            self.sel.register(conn, selectors.EVENT_READ, ('stub', pid, conn))
        except Exception as e:
            try:
                send_line(conn, {'cold': 'the template failed: %s: %s' % (type(e).__name__, e)})
            except OSError:
                pass
            conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def follow_stops(self):
        for pid, st in self.active.items():
            try:
                with open('/proc/%d/stat' % st[0]) as f:
                    stopped = f.read().rsplit(')', 1)[1].split()[0] == 'T'
            except (OSError, IndexError):
                continue
            if stopped != st[1]:
                try:
                    os.kill(pid, signal.SIGSTOP if stopped else signal.SIGCONT)
                except OSError:
                    pass
                st[1] = stopped

    def loop(self):
        while True:
            events = self.sel.select(0.1 if self.active else None)
            self.follow_stops()
            for key, _ in events:
                if key.data is None:
                    conn, _ = self.srv.accept()
                    self.serve(conn)
                elif key.data[0] == 'child':
                    _, pid, conn = key.data
                    _, status = os.waitpid(pid, 0)
                    self.active.pop(pid, None)
                    self.sel.unregister(key.fileobj)
                    os.close(key.fd)
                    try:
                        self.sel.unregister(conn)
                        send_line(conn, {'status': status})
                    except (OSError, KeyError, ValueError):
                        pass
                    conn.close()
                else:
                    _, pid, conn = key.data
                    self.sel.unregister(conn)
                    self.active.pop(pid, None)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass


def copy_stub(to):
    """The stub, copied to the path to (a new file, mode 0600)."""
    with open(STUB, 'rb') as f:
        text = f.read()
    fd = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, 'wb') as f:
        f.write(text)


def main(modules):
    # as under `python -c`: the modules are imported from the working
    # directory, not from this file's
    if not getattr(sys.flags, 'safe_path', False) and sys.path:
        sys.path[0] = ''
    why = import_all(modules) or unsafe()
    if why:
        say('refuse: ' + why)
        return 0
    tmp = tempfile.mkdtemp(prefix='leakproof-prefork-')
    try:
        path = os.path.join(tmp, 'sock')
        try:
            copy_stub(os.path.join(tmp, 'stub.py'))
        except OSError as e:
            say('refuse: cannot write %s: %s' % (e.filename or os.path.join(tmp, 'stub.py'), e.strerror))
            return 0
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # a socket's path holds 107 bytes at most, less than a long
            # $TMPDIR (pytest's, for one): bound through a descriptor of
            # its directory, as the stub connects
            d = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
            try:
                srv.bind('/proc/self/fd/%d/sock' % d)
            finally:
                os.close(d)
            srv.listen(64)
        except OSError as e:
            say('refuse: cannot listen on %s: %s' % (path, e.strerror or e))
            return 0
        template = Template(srv, modules)
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
        gc.collect()
        gc.freeze()
        say('ready ' + path)
        template.loop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
