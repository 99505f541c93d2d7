/*
 * prefork.c — the template process of warm starts and the stub that asks
 * it to fork (prefork.h). Both are Python, run with `-c` from the text
 * below; this file starts the template through platform/spawn.h, reads its
 * "ready SOCKET" line, and writes each trial's job command line.
 */
#include "sweep/prefork.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "util/util.h"

/*
 * The template: imports argv[1:], checks that a fork of it is safe, then
 * prints "ready SOCKET" (or "refuse: WHY") and serves: a request is a
 * 4-byte length and a JSON object {argv, cwd, env, fds, pid} with the
 * stub's descriptors attached; the answer a line {"cold": WHY}, or
 * {"pid": N} and, when the fork ends, {"status": WAIT_STATUS}. The stub's
 * connection closing kills the fork.
 */
static const char template_script[] =
	"import json, os, selectors, shutil, signal, socket, struct, sys, tempfile\n"
	"\n"
	"PREFIXES = ('OMP_', 'MKL_', 'OPENBLAS_', 'GOTO_', 'KMP_', 'BLIS_', 'VECLIB_', 'NUMEXPR_', 'TF_', 'TORCH_',\n"
	"            'PYTORCH_', 'XLA_', 'JAX_', 'CUDA_', 'NCCL_', 'MALLOC_', 'GLIBC_TUNABLES', 'LD_', 'PYTHON')\n"
	"APPLIED = ('PYTHONPATH', 'PYTHONUNBUFFERED', 'CUDA_VISIBLE_DEVICES')\n"
	"\n"
	"def say(text):\n"
	"    os.write(1, (text + '\\n').encode())\n"
	"\n"
	"mod = None\n"
	"try:\n"
	"    import importlib\n"
	"    for mod in sys.argv[1:]:\n"
	"        importlib.import_module(mod)\n"
	"except BaseException as e:\n"
	"    say('refuse: importing %s failed: %s: %s' % (mod, type(e).__name__, e))\n"
	"    sys.exit(0)\n"
	"\n"
	"def unsafe():\n"
	"    me = str(os.getpid())\n"
	"    tasks = [t for t in os.listdir('/proc/self/task') if t != me]\n"
	"    if tasks:\n"
	"        names = sorted(open('/proc/self/task/%s/comm' % t).read().strip() for t in tasks)\n"
	"        return ('the template runs %d more thread(s) after the imports (%s), which a fork would not '\n"
	"                'carry over' % (len(tasks), ', '.join(names)))\n"
	"    torch = sys.modules.get('torch')\n"
	"    if torch is not None and torch.cuda.is_initialized():\n"
	"        return 'CUDA is initialised in the template after the imports'\n"
	"    for fd in os.listdir('/proc/self/fd'):\n"
	"        try:\n"
	"            target = os.readlink('/proc/self/fd/' + fd)\n"
	"        except OSError:\n"
	"            continue\n"
	"        if target.startswith(('/dev/nvidia', '/dev/dri', '/dev/kfd', '/dev/accel')):\n"
	"            return 'an accelerator (%s) is open in the template after the imports' % target\n"
	"    return None\n"
	"\n"
	"why = unsafe()\n"
	"if why:\n"
	"    say('refuse: ' + why)\n"
	"    sys.exit(0)\n"
	"\n"
	"ENV0 = dict(os.environ)\n"
	"EXE = os.path.realpath(sys.executable)\n"
	"tmp = tempfile.mkdtemp(prefix='leakproof-prefork-')\n"
	"path = os.path.join(tmp, 'sock')\n"
	"srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
	"srv.bind(path)\n"
	"srv.listen(64)\n"
	"sel = selectors.DefaultSelector()\n"
	"sel.register(srv, selectors.EVENT_READ, None)\n"
	"signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))\n"
	"import gc\n"
	"gc.collect()\n"
	"gc.freeze()\n"
	"say('ready ' + path)\n"
	"\n"
	"def cgroups(pid):\n"
	"    out = {}\n"
	"    for line in open('/proc/%d/cgroup' % pid):\n"
	"        hid, ctrl, p = line.rstrip('\\n').split(':', 2)\n"
	"        out[ctrl] = p\n"
	"    return out\n"
	"\n"
	"def cgroup_files(stub):\n"
	"    \"\"\"The cgroup.procs files that move a process into stub's cgroups, or a reason why not.\"\"\"\n"
	"    mounts = {}\n"
	"    for line in open('/proc/self/mountinfo'):\n"
	"        pre, post = line.split(' - ', 1)\n"
	"        pre, post = pre.split(), post.split()\n"
	"        if post[0] == 'cgroup2':\n"
	"            mounts[''] = (pre[4], pre[3])\n"
	"        elif post[0] == 'cgroup':\n"
	"            for o in post[2].split(','):\n"
	"                mounts[o] = (pre[4], pre[3])\n"
	"    mine, theirs = cgroups(os.getpid()), cgroups(stub)\n"
	"    files = []\n"
	"    for ctrl, p in theirs.items():\n"
	"        if mine.get(ctrl) == p:\n"
	"            continue\n"
	"        m = mounts.get(ctrl.split(',')[0])\n"
	"        if not m:\n"
	"            continue\n"
	"        mnt, root = m\n"
	"        rel = p[len(root):] if root != '/' and p.startswith(root) else p\n"
	"        f = os.path.join(mnt, rel.lstrip('/'), 'cgroup.procs')\n"
	"        if not os.access(f, os.W_OK):\n"
	"            return None, 'cannot move a process into the trial\\'s cgroup (%s not writable)' % f\n"
	"        files.append(f)\n"
	"    if not files:\n"
	"        return None, ('the trial has no cgroup of its own, so its supervisor would not see a '\n"
	"                      'forked process')\n"
	"    return files, None\n"
	"\n"
	"def check(req, stub):\n"
	"    argv, env = req['argv'], req['env']\n"
	"    exe = shutil.which(argv[0], path=env.get('PATH', os.defpath)) if '/' not in argv[0] else argv[0]\n"
	"    if not exe or os.path.realpath(exe) != EXE:\n"
	"        return 'the command\\'s Python (%s) is not the template\\'s (%s)' % (argv[0], EXE)\n"
	"    if len(argv) < 2 or (argv[1].startswith('-') and argv[1] != '-m') or (argv[1] == '-m' and len(argv) < 3):\n"
	"        return 'the command is not PYTHON SCRIPT ... or PYTHON -m MODULE ...'\n"
	"    for name in sorted(set(env) | set(ENV0)):\n"
	"        if name.startswith(PREFIXES) and name not in APPLIED and env.get(name) != ENV0.get(name):\n"
	"            return ('%s is %s for the trial but %s in the template, which imported %s with it'\n"
	"                    % (name, repr(env[name]) if name in env else 'unset',\n"
	"                       repr(ENV0[name]) if name in ENV0 else 'unset', ', '.join(sys.argv[1:])))\n"
	"    return None\n"
	"\n"
	"def reseed():\n"
	"    \"\"\"Seed what a fresh interpreter seeds at its start, which a fork would carry over from\n"
	"    the template (every trial drawing the same numbers): random (also done by its own fork\n"
	"    handler), numpy's global RandomState, torch's CPU generator. CUDA's generators are seeded\n"
	"    when CUDA starts, in the trial. The hash seed cannot change in a running interpreter.\"\"\"\n"
	"    import random\n"
	"    random.seed()\n"
	"    nr = sys.modules.get('numpy.random')\n"
	"    if nr is not None:\n"
	"        nr.seed()\n"
	"    torch = sys.modules.get('torch')\n"
	"    if torch is not None and hasattr(torch, 'default_generator'):\n"
	"        torch.default_generator.seed()\n"
	"\n"
	"def run_trial(req, fds, files):\n"
	"    code = 1\n"
	"    try:\n"
	"        os.setpgid(0, os.getpgid(req['pid']))\n"
	"        for f in files:\n"
	"            with open(f, 'w') as fh:\n"
	"                fh.write(str(os.getpid()))\n"
	"        high = [os.dup(fd) for fd in fds]\n"
	"        keep = set(req['fds'])\n"
	"        for h, target in zip(high, req['fds']):\n"
	"            os.dup2(h, target, inheritable=True)\n"
	"        for fd in os.listdir('/proc/self/fd'):\n"
	"            if int(fd) not in keep:\n"
	"                try:\n"
	"                    os.close(int(fd))\n"
	"                except OSError:\n"
	"                    pass\n"
	"        os.chdir(req['cwd'])\n"
	"        os.environ.clear()\n"
	"        os.environ.update(req['env'])\n"
	"        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):\n"
	"            signal.signal(sig, signal.SIG_DFL)\n"
	"        signal.signal(signal.SIGINT, signal.default_int_handler)\n"
	"        gc.unfreeze()\n"
	"        reseed()\n"
	"        import io\n"
	"        unbuf = bool(os.environ.get('PYTHONUNBUFFERED'))\n"
	"        sys.stdin = io.open(0, 'r', closefd=False)\n"
	"        sys.stdout = io.open(1, 'w', closefd=False, buffering=1 if os.isatty(1) else -1)\n"
	"        sys.stderr = io.open(2, 'w', closefd=False, buffering=1, errors='backslashreplace')\n"
	"        if unbuf:\n"
	"            sys.stdout.reconfigure(write_through=True, line_buffering=True)\n"
	"        sys.stderr.reconfigure(write_through=True)\n"
	"        extra = [p for p in os.environ.get('PYTHONPATH', '').split(':') if p and p not in sys.path]\n"
	"        argv = req['argv']\n"
	"        import runpy\n"
	"        if argv[1] == '-m':\n"
	"            sys.argv = [argv[2]] + argv[3:]\n"
	"            sys.path[0:1] = [os.getcwd()] + extra\n"
	"            runpy.run_module(argv[2], run_name='__main__', alter_sys=True)\n"
	"        else:\n"
	"            sys.argv = argv[1:]\n"
	"            sys.path[0:1] = [os.path.dirname(os.path.abspath(argv[1]))] + extra\n"
	"            runpy.run_path(argv[1], run_name='__main__')\n"
	"        code = 0\n"
	"    except SystemExit as e:\n"
	"        if e.code is None:\n"
	"            code = 0\n"
	"        elif isinstance(e.code, int):\n"
	"            code = e.code\n"
	"        else:\n"
	"            print(e.code, file=sys.stderr)\n"
	"            code = 1\n"
	"    except KeyboardInterrupt:\n"
	"        import traceback\n"
	"        traceback.print_exc()    # as a cold interpreter prints it before it dies of SIGINT\n"
	"        code = -signal.SIGINT\n"
	"    except BaseException:\n"
	"        import traceback\n"
	"        traceback.print_exc()\n"
	"        code = 1\n"
	"    try:\n"
	"        import threading, atexit\n"
	"        threading._shutdown()\n"
	"        atexit._run_exitfuncs()\n"
	"        sys.stdout.flush()\n"
	"        sys.stderr.flush()\n"
	"    except BaseException:\n"
	"        pass\n"
	"    if code < 0:\n"
	"        signal.signal(-code, signal.SIG_DFL)\n"
	"        os.kill(os.getpid(), -code)\n"
	"    os._exit(code & 0xff)\n"
	"\n"
	"def recv_request(conn):\n"
	"    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 256)\n"
	"    if len(data) < 4:\n"
	"        raise ValueError('short request')\n"
	"    n = struct.unpack('I', data[:4])[0]\n"
	"    data = data[4:]\n"
	"    while len(data) < n:\n"
	"        more = conn.recv(n - len(data))\n"
	"        if not more:\n"
	"            raise ValueError('short request')\n"
	"        data += more\n"
	"    return json.loads(data), fds\n"
	"\n"
	"def serve(conn):\n"
	"    cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize('3i'))\n"
	"    peer, uid, _ = struct.unpack('3i', cred)\n"
	"    if uid != os.getuid():\n"
	"        conn.close()\n"
	"        return\n"
	"    conn.settimeout(30)\n"
	"    fds = []\n"
	"    try:\n"
	"        req, fds = recv_request(conn)\n"
	"        if req.get('pid') != peer:\n"
	"            raise ValueError('the request is not from its sender')\n"
	"        why = check(req, peer)\n"
	"        files = None\n"
	"        if not why:\n"
	"            files, why = cgroup_files(peer)\n"
	"        if why:\n"
	"            conn.sendall((json.dumps({'cold': why}) + '\\n').encode())\n"
	"            conn.close()\n"
	"            return\n"
	"        sys.stdout.flush()\n"
	"        sys.stderr.flush()\n"
	"        pid = os.fork()\n"
	"        if pid == 0:\n"
	"            run_trial(req, fds, files)\n"
	"        conn.sendall((json.dumps({'pid': pid}) + '\\n').encode())\n"
	"        pidfd = os.pidfd_open(pid)\n"
	"        active[pid] = [peer, False]\n"
	"        sel.register(pidfd, selectors.EVENT_READ, ('child', pid, conn))\n"
	"        sel.register(conn, selectors.EVENT_READ, ('stub', pid, conn))\n"
	"    except Exception as e:\n"
	"        try:\n"
	"            conn.sendall((json.dumps({'cold': 'the template failed: %s: %s' % (type(e).__name__, e)}) + '\\n').encode())\n"
	"        except OSError:\n"
	"            pass\n"
	"        conn.close()\n"
	"    finally:\n"
	"        for fd in fds:\n"
	"            os.close(fd)\n"
	"\n"
	"# fork -> [its stub, stopped by us]: SIGSTOP cannot be caught, so a stub stopped\n"
	"# (SIGSTOP, SIGTSTP) is seen in its /proc state, and its fork stopped with it\n"
	"active = {}\n"
	"\n"
	"def follow_stops():\n"
	"    for pid, st in active.items():\n"
	"        try:\n"
	"            with open('/proc/%d/stat' % st[0]) as f:\n"
	"                stopped = f.read().rsplit(')', 1)[1].split()[0] == 'T'\n"
	"        except (OSError, IndexError):\n"
	"            continue\n"
	"        if stopped != st[1]:\n"
	"            try:\n"
	"                os.kill(pid, signal.SIGSTOP if stopped else signal.SIGCONT)\n"
	"            except OSError:\n"
	"                pass\n"
	"            st[1] = stopped\n"
	"\n"
	"try:\n"
	"    while True:\n"
	"        events = sel.select(0.1 if active else None)\n"
	"        follow_stops()\n"
	"        for key, _ in events:\n"
	"            if key.data is None:\n"
	"                conn, _ = srv.accept()\n"
	"                serve(conn)\n"
	"            elif key.data[0] == 'child':\n"
	"                _, pid, conn = key.data\n"
	"                _, status = os.waitpid(pid, 0)\n"
	"                active.pop(pid, None)\n"
	"                sel.unregister(key.fileobj)\n"
	"                os.close(key.fd)\n"
	"                try:\n"
	"                    sel.unregister(conn)\n"
	"                    conn.sendall((json.dumps({'status': status}) + '\\n').encode())\n"
	"                except (OSError, KeyError, ValueError):\n"
	"                    pass\n"
	"                conn.close()\n"
	"            else:\n"
	"                _, pid, conn = key.data\n"
	"                sel.unregister(conn)\n"
	"                active.pop(pid, None)\n"
	"                try:\n"
	"                    os.kill(pid, signal.SIGKILL)\n"
	"                except OSError:\n"
	"                    pass\n"
	"finally:\n"
	"    shutil.rmtree(tmp, ignore_errors=True)\n";
/* The stub, written beside the socket as stub.py: argv[1:] the trial's
 * command. While the fork runs, the signals in FORWARD sent to the stub
 * alone reach the fork: the stub blocks them and a thread takes each
 * (sigwaitinfo) and sends it on, unless it came from the supervisor (the
 * stub's parent) with kill(), which is how the supervisor signals the
 * job's process group, the fork included (one signal, never two); the
 * supervisor's stop signal to the job's pid is sent with sigqueue()
 * (si_code SI_QUEUE) and is forwarded. The stub then ends as the fork
 * ended: the same exit status, or death by the same signal. */
static const char stub_script[] =
	"import _json, _signal, _socket, _thread, os, struct, sys\n"
	"# the C modules, not json, signal, socket, threading: those import re and enum,\n"
	"# which took most of the stub's start (about 20 ms against 9)\n"
	"path, argv = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sock'), sys.argv[1:]\n"
	"FORWARD = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGUSR1, _signal.SIGUSR2)\n"
	"SI_USER = 0    # kill(); sigqueue() is SI_QUEUE\n"
	"\n"
	"def cold(why):\n"
	"    os.write(2, ('leakproof: prefork: cold start: %s\\n' % why).encode())\n"
	"    os.execvp(argv[0], argv)\n"
	"\n"
	"def enc(v):\n"
	"    \"\"\"JSON as json.dumps writes it (ASCII; a lone surrogate as \\\\udcXX).\"\"\"\n"
	"    if isinstance(v, str):\n"
	"        return _json.encode_basestring_ascii(v)\n"
	"    if isinstance(v, dict):\n"
	"        return '{' + ', '.join(enc(k) + ': ' + enc(x) for k, x in v.items()) + '}'\n"
	"    if isinstance(v, list):\n"
	"        return '[' + ', '.join(enc(x) for x in v) + ']'\n"
	"    return str(int(v))\n"
	"\n"
	"buf = b''\n"
	"def reply():\n"
	"    \"\"\"The template's next line, {\\\"KEY\\\": NUMBER} or {\\\"KEY\\\": \\\"TEXT\\\"}, as (KEY, VALUE);\n"
	"    ValueError when there is none or it is not one.\"\"\"\n"
	"    global buf\n"
	"    while b'\\n' not in buf:\n"
	"        more = s.recv(4096)\n"
	"        if not more:\n"
	"            raise ValueError('the template ended')\n"
	"        buf += more\n"
	"    line, _, buf = buf.partition(b'\\n')\n"
	"    text = line.decode().strip()\n"
	"    if not (text.startswith('{\"') and text.endswith('}')):\n"
	"        raise ValueError('not an answer: %r' % text[:80])\n"
	"    key, _, value = text[1:-1].partition(':')\n"
	"    key, value = key.strip()[1:-1], value.strip()\n"
	"    return key, _json.scanstring(value, 1)[0] if value.startswith('\"') else int(value)\n"
	"\n"
	"try:\n"
	"    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)\n"
	"    s.connect(path)\n"
	"except OSError as e:\n"
	"    cold('no template at %s (%s)' % (path, e.strerror))\n"
	"fds = []\n"
	"for f in os.listdir('/proc/self/fd'):\n"
	"    fd = int(f)\n"
	"    if fd != s.fileno():\n"
	"        try:\n"
	"            os.fstat(fd)\n"
	"            fds.append(fd)\n"
	"        except OSError:\n"
	"            pass\n"
	"fds.sort()\n"
	"req = enc({'argv': argv, 'cwd': os.getcwd(), 'env': dict(os.environ), 'fds': fds,\n"
	"           'pid': os.getpid()}).encode()\n"
	"_signal.signal(_signal.SIGQUIT, _signal.SIG_IGN)\n"
	"old_mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, FORWARD)\n"
	"try:\n"
	"    data = struct.pack('I', len(req)) + req\n"
	"    sent = s.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack('%di' % len(fds), *fds))])\n"
	"    if sent < len(data):\n"
	"        s.sendall(data[sent:])\n"
	"    key, first = reply()\n"
	"except (OSError, ValueError) as e:\n"
	"    key, first = 'cold', 'the template did not answer (%s)' % e\n"
	"if key != 'pid':\n"
	"    s.close()\n"
	"    _signal.signal(_signal.SIGQUIT, _signal.SIG_DFL)\n"
	"    _signal.pthread_sigmask(_signal.SIG_SETMASK, old_mask)\n"
	"    cold(first if key == 'cold' else 'the template answered %r' % key)\n"
	"pid = first\n"
	"parent = os.getppid()\n"
	"main = _thread.get_ident()\n"
	"\n"
	"def forward():\n"
	"    while True:\n"
	"        si = _signal.sigwaitinfo(FORWARD)\n"
	"        if si.si_pid == parent and si.si_code == SI_USER:\n"
	"            continue    # the supervisor signalled the job's group: the fork has it already\n"
	"        try:\n"
	"            os.kill(pid, si.si_signo)\n"
	"        except OSError:\n"
	"            pass\n"
	"\n"
	"_thread.start_new_thread(forward, ())\n"
	"try:\n"
	"    key, status = reply()\n"
	"    if key != 'status':\n"
	"        raise ValueError(key)\n"
	"except (OSError, ValueError):\n"
	"    os.write(2, b'leakproof: prefork: the template ended before the trial did\\n')\n"
	"    try:\n"
	"        os.kill(pid, _signal.SIGKILL)\n"
	"    except OSError:\n"
	"        pass\n"
	"    os._exit(1)\n"
	"if os.WIFSIGNALED(status):\n"
	"    sig = os.WTERMSIG(status)\n"
	"    try:\n"
	"        _signal.signal(sig, _signal.SIG_DFL)\n"
	"    except (OSError, ValueError):\n"
	"        pass    # SIGKILL, SIGSTOP: default always\n"
	"    _signal.pthread_kill(main, sig)\n"
	"    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])\n"
	"os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)\n";
/* Write len bytes of text to a new file path (mode 0600). 0, or -1 with errno. */
static int write_new_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < len; ) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		off += (size_t)w;
	}
	return close(fd);
}

struct prefork {
	pid_t pid;             /* the template; 0 once gone */
	char *python;
	char *socket;          /* its unix socket, DIR/sock */
	char *stub;            /* DIR/stub.py */
};

/* Whether the basename of prog names a Python interpreter. */
static bool is_python(const char *prog)
{
	const char *base = strrchr(prog, '/');
	base = base ? base + 1 : prog;
	return !strncmp(base, "python", 6);
}

struct prefork *prefork_start(const char *python, char *const *modules, int timeout_ms, char *why,
                              size_t whysz)
{
	why[0] = '\0';
	if (!is_python(python)) {
		snprintf(why, whysz, "the command does not start Python ('%s')", python);
		return NULL;
	}
	size_t n = 0;
	while (modules[n])
		n++;
	const char **argv = xcalloc(n + 5, sizeof(*argv));
	size_t k = 0;
	argv[k++] = python;
	argv[k++] = "-c";
	argv[k++] = template_script;
	for (size_t i = 0; i < n; i++)
		argv[k++] = modules[i];
	argv[k] = NULL;
	struct spawn sp = {
		.argv = argv, .path_lookup = true, .in.how = SPAWN_NULL, .out.how = SPAWN_PIPE,
		.reset_signals = true, .new_group = true, .death_signal = SIGTERM,
	};
	int rc = spawn_start(&sp);
	free(argv);
	if (rc) {
		snprintf(why, whysz, "cannot run '%s': %s", python, strerror(errno));
		return NULL;
	}
	/* its first line: "ready SOCKET" or "refuse: WHY" */
	char line[4096];
	size_t len = 0;
	int64_t end = mono_ns() + (int64_t)timeout_ms * 1000000;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		int64_t left = (end - mono_ns()) / 1000000;
		struct pollfd pfd = { .fd = sp.out.fd, .events = POLLIN };
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			snprintf(why, whysz, "the template did not import %s within %d s", modules[0],
			         timeout_ms / 1000);
			break;
		}
		ssize_t r = read(sp.out.fd, line + len, sizeof(line) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(sp.out.fd);
	line[len] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(line, "ready /", 7)) {
		struct prefork *p = xcalloc(1, sizeof(*p));
		p->pid = sp.pid;
		p->python = xstrdup(python);
		p->socket = xstrdup(line + 6);
		struct strbuf sb = STRBUF_INIT;
		strbuf_add(&sb, p->socket, (size_t)(strrchr(p->socket, '/') - p->socket));
		strbuf_addstr(&sb, "/stub.py");
		p->stub = strbuf_detach(&sb, NULL);
		if (write_new_file(p->stub, stub_script, sizeof(stub_script) - 1) == 0)
			return p;
		snprintf(why, whysz, "cannot write %s: %s", p->stub, strerror(errno));
		prefork_stop(p);
		return NULL;
	}
	if (!strncmp(line, "refuse: ", 8))
		snprintf(why, whysz, "%s", line + 8);
	else if (!len && !why[0])
		snprintf(why, whysz, "the template ended before it was ready (its message is above)");
	kill(sp.pid, SIGKILL);
	waitpid(sp.pid, NULL, 0);
	return NULL;
}

char **prefork_argv(const struct prefork *p, char *const *argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	char **out = xcalloc(n + 7, sizeof(*out));
	size_t k = 0;
	out[k++] = p->python;
	out[k++] = "-E";       /* the stub: no PYTHON* variables, no site: fast */
	out[k++] = "-S";
	out[k++] = p->stub;
	for (size_t i = 0; i < n; i++)
		out[k++] = argv[i];
	out[k] = NULL;
	return out;
}

bool prefork_reaped(struct prefork *p, pid_t pid, int wait_status)
{
	(void)wait_status;
	if (!p || pid <= 0 || pid != p->pid)
		return false;
	p->pid = 0;
	return true;
}

bool prefork_gone(const struct prefork *p)
{
	siginfo_t si = { 0 };
	if (!p || p->pid <= 0)
		return true;
	return waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p->pid;
}

void prefork_stop(struct prefork *p)
{
	if (!p)
		return;
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		int64_t end = mono_ns() + 5000000000LL;
		while (waitpid(p->pid, NULL, WNOHANG) == 0) {
			if (mono_ns() > end) {
				kill(p->pid, SIGKILL);
				waitpid(p->pid, NULL, 0);
				break;
			}
			usleep(10000);
		}
	}
	/* the template removes them as it ends; one killed (SIGKILL, the OOM
	 * killer) left them in $TMPDIR */
	unlink(p->socket);
	unlink(p->stub);
	*strrchr(p->stub, '/') = '\0';
	rmdir(p->stub);
	free(p->python);
	free(p->socket);
	free(p->stub);
	free(p);
}
