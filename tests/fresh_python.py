"""`run_python(argv, ...)`: `subprocess.run([sys.executable, ...], capture_output=True, text=True)` for
tests that need a fresh Python process (a fresh tilecraft: its caches, launcher, warnings, CLI), without
paying `import torch` (~1.7 CPU-s) in each of them.

A server process imports torch once and forks a child per call.  The child is a new process in
everything tilecraft can see -- tilecraft is not imported in the server, the child gets the caller's
environment, working directory, argv, `sys.path` (from PYTHONPATH, as a real start computes it) and its
own stdin/stdout/stderr -- and it exits the way Python does (atexit handlers, threads joined, uncaught
exceptions printed with exit status 1, signals reported as negative status).  What a fork cannot give is
an interpreter start, so the server is one started with the call's values of what Python or torch read
when they start (PYTHON* but PYTHONPATH, OMP_*, LD_*, TORCH*, ...): one server per such set, the last
three kept.  A command other than a plain `python -c CODE` / `python SCRIPT` / `python -m MODULE` runs as
a real subprocess.  Tests about interpreter start itself (what `import tilecraft` imports, a compile task
without torch) call subprocess directly.

`TILECRAFT_TEST_FORK_SERVER=0` turns the server off (every call a real subprocess).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

# read by the interpreter, the dynamic loader, OpenMP or torch when they start: a child must not
# differ from the server in these (it would inherit the server's start instead of its own)
_START_PREFIXES = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_", "TORCH", "PYTORCH_",
                   "CUDA_", "NVIDIA_", "MALLOC_", "GLIBC_", "LC_", "LANG")
_FREE = ("PYTHONPATH",)  # recomputed in the child exactly as a real start would

_SERVER_BODY = r'''
import json, os, sys
import gc
import torch  # noqa: F401 -- the point of the server: every child starts with it imported
gc.freeze()  # torch's objects out of the collector's sight: a child's exit does not touch (copy) their pages
proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.dup2(2, 1)
base_path = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
while True:
    line = proto_in.readline()
    if not line:
        os._exit(0)
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        break
    proto_out.write(b"%d\n" % pid)
    _, status = os.waitpid(pid, 0)
    proto_out.write(b"%d\n" % os.waitstatus_to_exitcode(status))
# ---- the child: a fresh process from here on
os.setsid()
proto_in.close()
proto_out.close()
for fd, name in ((1, "out"), (2, "err")):
    f = os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(f, fd)
    os.close(f)
os.environ.clear()
os.environ.update(req["env"])
os.chdir(req["cwd"])
del json, line, pid, fd, name, f
import runpy, types
argv = req["argv"]
extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if argv[0] == "-c":
    first = ""
elif argv[0] == "-m":
    first = os.getcwd()
else:
    first = os.path.dirname(os.path.realpath(argv[0]))
sys.path[:] = [first, *extra, *base_path]
sys.argv = ["-c", *argv[2:]] if argv[0] == "-c" else (list(argv[1:]) if argv[0] == "-m" else list(argv))
def _run():
    if argv[0] == "-c":
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    elif argv[0] == "-m":
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(argv[0], run_name="__main__")
try:
    _run()
except SystemExit:
    raise
except BaseException as e:  # as an interpreter reports it: the user's frames, status 1
    tb, t = e.__traceback__, e.__traceback__
    while t is not None:  # the user's frames: those after the server's own
        if t.tb_frame.f_code.co_filename in ("<fork-server>", runpy.__file__, "<frozen runpy>"):
            tb = t.tb_next
        t = t.tb_next
    sys.excepthook(type(e), e.with_traceback(tb), tb)
    sys.exit(1)
'''
_SERVER = f"exec(compile({_SERVER_BODY!r}, '<fork-server>', 'exec'))"

_lock = threading.Lock()
_servers: dict = {}   # what interpreter and torch start read (a frozenset of env items) -> a server started so
_MAX_SERVERS = 3      # the oldest is stopped past this: an environment used once costs one start, as a subprocess


def _start_env(env: dict) -> frozenset:
    return frozenset((k, v) for k, v in env.items() if k.startswith(_START_PREFIXES) and k not in _FREE)


def _plain_command(args: list) -> bool:
    if len(args) < 2 or args[0] != sys.executable:
        return False
    if args[1] in ("-c", "-m"):
        return len(args) >= 3
    return not args[1].startswith("-")


def _get_server(env: dict):
    """A server whose interpreter and torch started with `env`'s start-time variables (one per such set)."""
    key = _start_env(env)
    srv = _servers.pop(key, None)
    if srv is None or srv.poll() is not None:
        srv = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    _servers[key] = srv   # the most recently used last
    while len(_servers) > _MAX_SERVERS:
        _stop(_servers.pop(next(iter(_servers))))
    return srv


def _stop(srv) -> None:
    if srv.poll() is None:
        srv.stdin.close()  # the server exits at end of input
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()


@atexit.register
def _stop_servers():
    while _servers:
        _stop(_servers.popitem()[1])


def _read_line(pipe, deadline: float | None) -> str | None:
    """One protocol line, or None if `deadline` (time.monotonic) passes first."""
    import time
    buf = b""
    while not buf.endswith(b"\n"):
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([pipe], [], [], wait)
        if not ready:
            return None
        chunk = os.read(pipe.fileno(), 1)
        if not chunk:
            raise RuntimeError("the fork server of tests/fresh_python.py died")
        buf += chunk
    return buf.decode().strip()


def run_python(args: list, *, env: dict | None = None, cwd: str | os.PathLike | None = None,
               timeout: float | None = None, capture_output: bool = True, text: bool = True,
               **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(args, env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True)`,
    forked from a process that has torch imported where that is the same thing (see the module doc)."""
    import time
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
    if (not capture_output or not text or kwargs or os.environ.get("TILECRAFT_TEST_FORK_SERVER") == "0"
            or not _plain_command(args) or not hasattr(os, "fork")):
        return subprocess.run(args, env=env, cwd=cwd, timeout=timeout, capture_output=capture_output, text=text,
                              **kwargs)
    with _lock, tempfile.TemporaryDirectory(prefix="tc-fresh-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        srv = _get_server(env)
        srv.stdin.write((json.dumps({"argv": args[1:], "env": env, "cwd": cwd, "out": out, "err": err}) + "\n").encode())
        srv.stdin.flush()
        pid = int(_read_line(srv.stdout, None))
        rc = _read_line(srv.stdout, None if timeout is None else time.monotonic() + timeout)
        timed_out = rc is None
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:   # not its own group yet (setsid is its first step): the child alone
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            rc = _read_line(srv.stdout, None)
        with open(out, errors="replace") as f:
            stdout = f.read()
        with open(err, errors="replace") as f:
            stderr = f.read()
    if timed_out:
        # as subprocess.run gives them on a timeout: bytes, whatever `text` was
        raise subprocess.TimeoutExpired(args, timeout, output=stdout.encode(), stderr=stderr.encode())
    return subprocess.CompletedProcess(args, int(rc), stdout, stderr)
