"""Where ``scalelib grade`` runs one submission: a folder, a kernel and limits of its own, then nothing left.

Grader side, :class:`Sandbox` (one per notebook) makes:

* a fresh temporary folder (``scalelib-grade-*``, mode 700) holding ``home/`` (the
  kernel's working folder and ``HOME``, where the submission's copy is written),
  ``lib/scalelib`` (a copy of this package **without** ``course/answer_key/``, put
  first on the kernel's ``PYTHONPATH``), a kernelspec and the kernel's log;
* a minimal environment for the kernel: ``PATH``, ``HOME``, ``TMPDIR``, ``LANG``,
  ``MPLBACKEND=Agg``, ``SCALELIB_GRADING=1``, ``PYTHONPATH``; none of the
  instructor's own variables;
* a kernel in its own session (process group), talking over IPC sockets in that
  folder, whose stdout and stderr go to the log (the instructor's terminal shows
  only the report), and whose incoming messages are capped in size;
* on exit, every process of that session and every process it left behind is
  killed (the grader makes itself a "child subreaper" on Linux while a notebook
  runs, so that even a process that double-forks and calls ``setsid`` stays its
  descendant), and the folder is removed.

Kernel side, :func:`main` is the kernel's launcher (``python -m
scalelib.course.sandbox --memory BYTES --max-output BYTES --lib DIR -f CONNECTION``):
it sets the memory limit (``RLIMIT_AS``) and no core files, keeps the answer key
out of reach of ``import`` (no other copy of scalelib on the path, no editable-install
finder, a finder that refuses ``scalelib.course.answer_key``), caps the bytes of
output the kernel sends, then starts ipykernel.

What this does not do: it is not a file-system sandbox. The kernel runs as the
grader's user and can read (and write) whatever that user can. Run hostile
submissions inside a container (see the book's page for instructors).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .record import ANSWER_MIME, CALLS_MIME

#: The kernelspec name written into each sandbox.
KERNEL_NAME = "scalelib-grading"
#: MIME type of the probe the grader runs before a notebook's first cell.
PROBE_MIME = "application/vnd.scalelib.probe+json"
#: Text that replaces output beyond the kernel's output limit.
OUTPUT_DROPPED = "[scalelib grade: output beyond the limit of {limit} bytes was dropped]"
#: Largest answer record (or call results) the kernel sends whatever the output limit.
MAX_RECORD_BYTES = 8 * 2**20
#: Largest error (traceback) the kernel sends.
MAX_ERROR_BYTES = 64 * 2**10

_PR_SET_CHILD_SUBREAPER = 36


# ---------------------------------------------------------------------------
# Grader side


def package_copy(destination: Path) -> Path:
    """Copy the scalelib package into `destination`, leaving out the answer key; return the copy's folder."""
    source = Path(__file__).resolve().parents[1]

    def ignore(folder, names):
        skip = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(folder).resolve() == source / "course":
            skip.add("answer_key")
        return skip

    target = destination / "scalelib"
    shutil.copytree(source, target, ignore=ignore)
    return target


def _set_subreaper(on: bool) -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - best effort: the session kill still applies
        return False


def _session_members(sid: int) -> list[int]:
    """Pids of the processes in session `sid` (Linux /proc; empty elsewhere)."""
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 3 and fields[3] == str(sid):
            pids.append(int(entry))
    return pids


class Sandbox:
    """One submission's temporary folder, kernel environment and clean-up (a context manager).

    Args:
        memory_bytes: the kernel's address-space limit (``RLIMIT_AS``), or None.
        max_output_bytes: the most bytes of output the kernel sends.
    """

    def __init__(self, memory_bytes: int | None, max_output_bytes: int):
        self.memory_bytes = memory_bytes
        self.max_output_bytes = max_output_bytes
        self.root: Path | None = None
        self.kernel_pid: int | None = None
        self.leftovers_killed = 0
        self._before: set[int] = set()
        self._reaping = False
        self._log = None

    # -- set-up ---------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        self.root = Path(tempfile.mkdtemp(prefix="scalelib-grade-"))
        os.chmod(self.root, 0o700)
        self.home.mkdir()
        (self.home / "tmp").mkdir()
        package_copy(self.lib)
        spec = self.root / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "scalelib.course.sandbox", "--lib", str(self.lib),
                "--max-output", str(int(self.max_output_bytes))]
        if self.memory_bytes:
            argv += ["--memory", str(int(self.memory_bytes))]
        (spec / "kernel.json").write_text(json.dumps({
            "argv": argv + ["-f", "{connection_file}"],
            "display_name": "scalelib grading", "language": "python",
        }, indent=1))
        return self

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def log_path(self) -> Path:
        return self.root / "kernel.log"

    def env(self) -> dict[str, str]:
        """The kernel's whole environment: nothing of the instructor's own."""
        from .check import GRADING_ENV

        python_bin = str(Path(sys.executable).parent)
        return {
            "PATH": os.pathsep.join([python_bin, "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(self.home),
            "TMPDIR": str(self.home / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "MPLBACKEND": "Agg",
            GRADING_ENV: "1",
            "PYTHONPATH": str(self.lib),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "MALLOC_ARENA_MAX": "2",  # fewer malloc arenas: less address space for the same memory
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }

    def kernel_manager(self):
        """An AsyncKernelManager for this sandbox's kernelspec, over IPC, with capped incoming messages."""
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager

        specs = KernelSpecManager(kernel_dirs=[str(self.root / "kernels")], ensure_native_kernel=False)
        transport = "ipc" if os.name == "posix" else "tcp"
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs, transport=transport,
                                connection_file=str(self.root / "kernel.json"))
        limit = int(max(self.max_output_bytes, MAX_RECORD_BYTES) + 2**20)
        km.client_factory = type("CappedClient", (_capped_client_class(),), {"max_frame_bytes": limit})
        return km

    def start_kwargs(self) -> dict:
        """Keyword arguments for starting the kernel (environment, folder, where its output goes)."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in __exit__
        return {"env": self.env(), "cwd": str(self.home), "stdout": self._log, "stderr": self._log,
                "stdin": subprocess.DEVNULL}

    def before_start(self) -> None:
        """Note the processes that exist before the kernel starts; adopt orphans from now on."""
        self._before = _descendants()
        self._reaping = _set_subreaper(True)

    def kernel_started(self, km) -> None:
        """Note the kernel's pid (its session id too) once `km` has started it."""
        process = getattr(getattr(km, "provisioner", None), "process", None)
        self.kernel_pid = getattr(process, "pid", None)

    def kernel_log(self, limit: int = 2000) -> str:
        """The last `limit` characters the kernel wrote to its stdout and stderr."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # -- clean-up -------------------------------------------------------------
    def kill_all(self) -> int:
        """Kill the kernel's session and every process it left behind; how many were still alive."""
        killed = set()
        for _ in range(20):  # a process may fork while we sweep: sweep until nothing is left
            pids = set()
            if self.kernel_pid:
                pids.update(_session_members(self.kernel_pid))
                try:
                    os.killpg(self.kernel_pid, signal.SIGKILL)
                except OSError:
                    pass
            pids.update(_descendants() - self._before)
            pids.discard(os.getpid())
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except OSError:
                    pass
            _reap(pids)
        if self.kernel_pid in killed:
            killed.discard(self.kernel_pid)
        return len(killed)

    def __exit__(self, *exc) -> None:
        try:
            self.leftovers_killed = self.kill_all()
        finally:
            if self._reaping:
                _set_subreaper(False)
            if self._log:
                self._log.close()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)


def _descendants() -> set[int]:
    """Pids of this process's descendants."""
    try:
        import psutil

        return {p.pid for p in psutil.Process().children(recursive=True)}
    except Exception:  # noqa: BLE001 - psutil missing or a process vanished mid-walk
        return set()


def _reap(pids) -> None:
    """Wait for the killed `pids` that are our children, so that none stays a zombie."""
    deadline = time.monotonic() + 3
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child: its own parent (or init) reaps it
                break
            except OSError:
                break
            if done:
                break
            time.sleep(0.01)


_CAPPED_CLIENT = None


def _capped_client_class():
    """The kernel client class whose sockets refuse oversized frames (made once, on first use)."""
    global _CAPPED_CLIENT
    if _CAPPED_CLIENT is not None:
        return _CAPPED_CLIENT
    import zmq
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.connect import channel_socket_types

    class CappedClient(AsyncKernelClient):
        """A kernel client whose sockets refuse any frame over `max_frame_bytes` (zmq MAXMSGSIZE).

        A kernel that sends a bigger message is disconnected instead of growing
        the grader's memory; the cell then ends by its time limit.
        """

        max_frame_bytes = 64 * 2**20

        def _create_connected_socket(self, channel, identity=None):
            sock = self.context.socket(channel_socket_types[channel])
            sock.linger = 1000
            sock.setsockopt(zmq.MAXMSGSIZE, int(self.max_frame_bytes))
            if identity:
                sock.identity = identity
            if getattr(self, "curve_publickey", None) is not None:
                sock.curve_secretkey = self.curve_secretkey
                sock.curve_publickey = self.curve_publickey
                sock.curve_serverkey = self.curve_publickey
            sock.connect(self._make_url(channel))
            return sock

    _CAPPED_CLIENT = CappedClient
    return CappedClient


def probe() -> None:
    """Kernel side: display where scalelib came from and whether the answer key can be imported."""
    import importlib
    from IPython.display import display

    import scalelib

    try:
        importlib.import_module("scalelib.course.answer_key")
        answer_key = True
    except Exception:  # noqa: BLE001
        answer_key = False
    from .check import GRADING_ENV

    display({"text/plain": "grading kernel ready",
             PROBE_MIME: {"scalelib": scalelib.__file__, "answer_key": answer_key,
                          "grading": os.environ.get(GRADING_ENV) == "1"}}, raw=True)


# ---------------------------------------------------------------------------
# Kernel side: the launcher


class _AnswerKeyBlocker:
    """A meta-path finder that refuses to import the answer key in a grading kernel."""

    PREFIX = "scalelib.course.answer_key"

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname == cls.PREFIX or fullname.startswith(cls.PREFIX + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (the answer key is not available while "
                                      f"grading)", name=fullname)
        return None


def _isolate_imports(lib: str) -> None:
    """Only the grading copy of scalelib (in `lib`) can be imported; never the answer key."""
    lib = os.path.realpath(lib)
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path[:] = [p for p in sys.path
                   if os.path.realpath(p or ".") == lib
                   or not os.path.exists(os.path.join(p or ".", "scalelib", "__init__.py"))]
    sys.meta_path.insert(0, _AnswerKeyBlocker)


def _cap_output(limit: int) -> None:
    """Cap the bytes of output the kernel sends (streams, displays, results) at `limit` over its life.

    Answer records and call results pass (up to :data:`MAX_RECORD_BYTES` each);
    errors pass, their tracebacks cut to :data:`MAX_ERROR_BYTES`. Past the limit,
    output is replaced by one line saying it was dropped.
    """
    from jupyter_client.session import Session

    original = Session.serialize
    state = {"used": 0, "noted": False}
    outputs = {"stream", "display_data", "execute_result", "update_display_data"}

    def serialize(self, msg, ident=None):
        frames = original(self, msg, ident)
        header = msg.get("header") or {}
        kind = header.get("msg_type") if isinstance(header, dict) else None
        content = msg.get("content")
        if not isinstance(content, dict):
            return frames
        size = len(frames[-1]) + len(frames[-2])
        if kind in ("error", "execute_reply") and size > MAX_ERROR_BYTES:
            short = dict(content)
            short["evalue"] = str(short.get("evalue", ""))[:1000]
            short["traceback"] = ["(traceback too long: dropped)"]
            return original(self, {**msg, "content": short}, ident)
        if kind not in outputs:
            return frames
        data = content.get("data")
        if isinstance(data, dict) and (ANSWER_MIME in data or CALLS_MIME in data or PROBE_MIME in data) \
                and size <= MAX_RECORD_BYTES:
            return frames
        if state["used"] + size <= limit:
            state["used"] += size
            return frames
        notice = "" if state["noted"] else OUTPUT_DROPPED.format(limit=limit) + "\n"
        state["noted"] = True
        if kind == "stream":
            small = {"name": content.get("name", "stdout"), "text": notice}
        else:
            small = {"data": {"text/plain": notice}, "metadata": {}, "transient": {}}
            if "execution_count" in content:
                small["execution_count"] = content["execution_count"]
        return original(self, {**msg, "content": small, "metadata": {}}, ident)

    Session.serialize = serialize


def main(argv=None) -> None:
    """The grading kernel's launcher: limits, import isolation and output cap, then ipykernel."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m scalelib.course.sandbox")
    parser.add_argument("--lib", required=True)
    parser.add_argument("--memory", type=int, default=0)
    parser.add_argument("--max-output", type=int, required=True)
    args, rest = parser.parse_known_args(argv)
    try:
        import resource

        if args.memory:
            resource.setrlimit(resource.RLIMIT_AS, (args.memory, args.memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError) as err:
        print(f"scalelib sandbox: could not set limits: {err}", file=sys.stderr)
    _isolate_imports(args.lib)
    _cap_output(args.max_output)
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance(argv=rest)


if __name__ == "__main__":
    main()
