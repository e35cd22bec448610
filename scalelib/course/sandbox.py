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

Isolation (Linux, :func:`isolation`): the kernel runs inside a bubblewrap (``bwrap``)
sandbox of Linux namespaces: its own PID namespace (it sees and can signal only its
own processes, never the grader or another kernel), no network, a file system made of
read-only ``/usr``, the Python installation and its virtual environment (with any
editable-install finder or ``direct_url.json`` that points at the course's checkout
masked, and any installed copy of scalelib hidden), the grading copy of scalelib
(read-only, no answer key) and two writable folders of its own (``home/``, a tmpfs of
``home_bytes`` where bubblewrap can size one, and the folder of its connection file); no
checkout, no home folder of the grader, no gradebook folder, no ``/proc`` of other
processes. When the grader runs as root, each kernel runs as a user of its own (from
:data:`KERNEL_UIDS`; ``nobody`` only where none can be had) with no capabilities, so its
process count (``RLIMIT_NPROC``, which Linux counts per user) is its own; its memory
and number of processes are also limited for all its processes together by a cgroup
where one can be made. As any other user, each kernel has a user namespace of its own,
in which Linux (5.14 and later) counts its processes apart from every other kernel's.
Per process, the limits are ``RLIMIT_AS`` (memory), ``RLIMIT_NPROC``, ``RLIMIT_CPU``
and ``RLIMIT_FSIZE`` (the largest file). Where no sandbox can be made, :class:`Sandbox`
refuses (:class:`SandboxUnavailable`) unless it is built with ``unsafe=True``.

Without namespaces, as root (Gradescope's containers): where :data:`KERNEL_USER_ENV` names an
unprivileged user (Gradescope's ``setup.sh`` creates ``scalelib-learner``), an ``--unsafe`` kernel
still runs as that user, with no capabilities and no way to gain any (``setpriv``), its home and
connection folders its own; what root alone may read (the answer key, once ``setup.sh`` has made it
so) stays out of its reach. It then shares the machine's process list, network and file system.

What it does not protect against: a flaw in the Linux kernel or in bubblewrap
itself; reading what the Python installation holds (it is shared, read-only); and
using the machine's CPU time up to the limits given.
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .._errors import ScalelibError
from .i18n import LANGUAGE_ENV, trusted_language
from .record import ANSWER_MIME, CALLS_MIME
from .verdict import GRADING_ENV

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
#: Debian's ``nobody``: the user of the sandbox test, and of a kernel when no user of its own can be had.
NOBODY = 65534
#: When the grader is root, each kernel runs as a user of its own, the first free one from this range
#: (no other process runs as it; a lock file holds it while the kernel lives): its process count
#: (``RLIMIT_NPROC``, counted per user) is its own, so no kernel can starve another.
KERNEL_UIDS = range(1_500_000, 1_500_000 + 4096)
#: Most processes (and threads) one kernel may run at once.
MAX_PROCESSES = 512
#: Largest file a kernel may write (B).
MAX_FILE_BYTES = 256 * 2**20
#: Environment variable naming the unprivileged user an ``--unsafe`` kernel runs as when the grader is root and
#: no namespace sandbox can be made (Gradescope's ``run_autograder`` sets it to the user ``setup.sh`` created).
KERNEL_USER_ENV = "SCALELIB_KERNEL_USER"


class SandboxUnavailable(ScalelibError, RuntimeError):
    """No namespace sandbox can be made on this machine (the message says why and what to do)."""


@functools.lru_cache(maxsize=None)
def isolation() -> tuple[bool, str]:
    """Whether a kernel can be run in a bubblewrap sandbox here, and how (or why not).

    Tried once per process: ``bwrap`` runs ``true`` in fresh PID, network, IPC and UTS
    namespaces (as ``nobody`` when this process is root).
    """
    if not sys.platform.startswith("linux"):
        return False, "bubblewrap sandboxes need Linux"
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False, ("bubblewrap is not installed (Debian/Ubuntu: `apt-get install bubblewrap`; the course's "
                       "`make browser` target installs it)")
    argv = [bwrap, *_namespace_args(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    argv += _drop_privileges() + ["/bin/true"]
    try:
        result = subprocess.run(argv, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"bubblewrap could not run: {err}"
    if result.returncode != 0:
        why = result.stderr.decode("utf-8", "replace").strip().splitlines()
        return False, (f"bubblewrap cannot make namespaces here ({why[-1] if why else result.returncode}); "
                       f"unprivileged user namespaces may be switched off")
    if os.geteuid() != 0:
        who = f"as uid {os.geteuid()}"
    elif _uid_mapped(KERNEL_UIDS):
        who = f"each kernel as a user of its own (a uid from {KERNEL_UIDS.start})"
    else:
        who = f"as uid {NOBODY} (nobody)"
    return True, f"bubblewrap {bwrap}: private PID, network, IPC and mount namespaces, {who}"


def _namespace_args() -> list[str]:
    """bwrap's namespace options: a user namespace too unless root (root makes them without one)."""
    base = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    return base if os.geteuid() == 0 else ["--unshare-user", "--cap-drop", "ALL", *base]


def _drop_privileges(uid: int = NOBODY) -> list[str]:
    """The command prefix that makes a root sandbox's process user `uid` (group `uid`) with no capabilities."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--bounding-set=-all",
            "--inh-caps=-all", "--no-new-privs", "--"]


@functools.lru_cache(maxsize=None)
def _bwrap_sizes_tmpfs() -> bool:
    """Whether this bubblewrap can give a tmpfs a size (``--size``, bubblewrap 0.7 and later) and a mode (``--perms``)."""
    try:
        text = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in text and "--perms" in text


def _uid_mapped(uids: range) -> bool:
    """Whether every uid of `uids` exists in this process's user namespace (a container may map only a few)."""
    try:
        lines = Path("/proc/self/uid_map").read_text().split("\n")
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and int(parts[0]) <= uids.start and uids.stop <= int(parts[0]) + int(parts[2]):
            return True
    return False


class _KernelUser:
    """A user of one kernel's own (root only): the first uid of :data:`KERNEL_UIDS` that no process runs as and
    no other grader holds (an exclusive lock on ``/run/lock/scalelib-grade/UID.lock``, or under the temporary
    folder), held until :meth:`release`. Where none can be had, ``nobody`` (shared: :attr:`own` is False)."""

    def __init__(self):
        self.uid, self.own, self._lock = NOBODY, False, None
        if os.geteuid() != 0 or not _uid_mapped(KERNEL_UIDS):
            return
        try:
            import fcntl

            import psutil

            folder = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()) / "scalelib-grade"
            folder.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(folder)
            if not os.path.isdir(folder) or os.path.islink(folder) or info.st_uid != 0:
                return
            busy = {p.info["uids"].real for p in psutil.process_iter(["uids"]) if p.info.get("uids")}
            for uid in KERNEL_UIDS:
                if uid in busy:
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                self.uid, self.own, self._lock = uid, True, fd
                return
        except (ImportError, OSError):
            return

    def processes(self) -> set[int]:
        """Pids of the processes that run as this kernel's own user (none when it has no user of its own)."""
        if not self.own:
            return set()
        try:
            import psutil

            return {p.pid for p in psutil.process_iter(["uids"]) if p.info.get("uids")
                    and self.uid in (p.info["uids"].real, p.info["uids"].effective)}
        except Exception:  # noqa: BLE001
            return set()

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def fallback_user() -> tuple[int, int] | None:
    """The (uid, gid) of the user :data:`KERNEL_USER_ENV` names, when this process is root; else None.

    Raises:
        SandboxUnavailable: the variable names no user, or names root.
    """
    name = os.environ.get(KERNEL_USER_ENV, "").strip()
    if not name or os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SandboxUnavailable(f"{KERNEL_USER_ENV}={name!r} names no user of this machine (create it with "
                                 f"`useradd --system {name}`, as Gradescope's setup.sh does)") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SandboxUnavailable(f"{KERNEL_USER_ENV}={name!r} must name an unprivileged user, not root")
    return entry.pw_uid, entry.pw_gid


def _site_masks(prefix: Path) -> list[str]:
    """bwrap options hiding, inside `prefix`, whatever leads to the course's checkout or an installed scalelib."""
    args: list[str] = []
    for site in glob.glob(str(prefix / "lib" / "python*" / "site-packages")):
        for pattern in ("__editable__*", "*.egg-link", "scalelib*.dist-info/direct_url.json",
                        "scalelib*.dist-info/RECORD", "scalelib*.egg-info/SOURCES.txt"):
            for path in glob.glob(os.path.join(site, pattern)):
                if os.path.isfile(path) and path not in args:
                    args += ["--ro-bind", "/dev/null", path]
        for pth in glob.glob(os.path.join(site, "*.pth")):
            try:
                text = Path(pth).read_text(errors="replace")
            except OSError:
                continue
            if ("scalelib" in text or str(Path(__file__).resolve().parents[2]) in text) and pth not in args:
                args += ["--ro-bind", "/dev/null", pth]
        installed = os.path.join(site, "scalelib")
        if os.path.isdir(installed):
            args += ["--tmpfs", installed]
    return args


class _Cgroup:
    """A memory and process-count cgroup for one kernel (v2, or v1's memory and pids hierarchies), if one can be made."""

    def __init__(self, memory_bytes: int | None):
        self.dirs: list[Path] = []
        self.memory_dir: Path | None = None
        self.version = 0
        if os.geteuid() != 0:
            return
        name = "scalelib-grade-" + secrets.token_hex(6)
        try:
            self._make(name, memory_bytes)
        except OSError:
            self.remove()
            self.dirs, self.memory_dir, self.version = [], None, 0

    @staticmethod
    def _own(controller: str) -> str:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
        return "/"

    def _make(self, name: str, memory_bytes: int | None) -> None:
        v2 = Path("/sys/fs/cgroup")
        if (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.controllers").read_text().split():
            own = Path("/proc/self/cgroup").read_text().splitlines()[0].split(":", 2)[2].lstrip("/")
            folder = v2 / own / name
            folder.mkdir()
            self.dirs.append(folder)
            if memory_bytes:
                (folder / "memory.max").write_text(str(memory_bytes))
                if (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(MAX_PROCESSES))
            self.memory_dir, self.version = folder, 2
            return
        memory, pids = v2 / "memory", v2 / "pids"
        if not (memory / "cgroup.procs").exists():
            return
        folder = memory / self._own("memory").lstrip("/") / name
        folder.mkdir()
        self.dirs.append(folder)
        if memory_bytes:
            (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
            swap = folder / "memory.memsw.limit_in_bytes"
            if swap.exists():
                try:
                    swap.write_text(str(memory_bytes))
                except OSError:
                    pass
        self.memory_dir, self.version = folder, 1
        if (pids / "cgroup.procs").exists():
            folder = pids / self._own("pids").lstrip("/") / name
            folder.mkdir()
            self.dirs.append(folder)
            (folder / "pids.max").write_text(str(MAX_PROCESSES))

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def members(self) -> set[int]:
        pids: set[int] = set()
        for d in self.dirs:
            try:
                pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return pids

    def memory_exhausted(self) -> bool:
        """Whether the kernel's processes reached the memory limit (an allocation refused or a process killed)."""
        if self.memory_dir is None:
            return False
        try:
            if self.version == 2:
                events = dict(line.split() for line in (self.memory_dir / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) > 0 or int(events.get("max", 0)) > 0
            return int((self.memory_dir / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


# ---------------------------------------------------------------------------
# Grader side


def package_copy(destination: Path) -> Path:
    """Copy the scalelib package into `destination`, leaving out the answer key; return the copy's folder."""
    source = Path(__file__).resolve().parents[1]

    def ignore(folder, names):
        skip = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(folder).resolve() == source / "course":
            skip.add("answer_key")
            skip.add("locale")  # its catalogs translate the answer key's texts (a choice's reason among them)
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
    """One submission's temporary folder, kernel environment, namespace sandbox and clean-up (a context manager).

    Args:
        memory_bytes: the kernel's memory limit (a cgroup's over all its processes where
            one can be made, and ``RLIMIT_AS`` per process), or None.
        max_output_bytes: the most bytes of output the kernel sends.
        cpu_seconds: the CPU time each of the kernel's processes may use (``RLIMIT_CPU``), or None.
        home_bytes: the size of the kernel's home (a tmpfs of that size in the sandbox, where
            bubblewrap can size one; :attr:`home_limited` says whether it did), or None.
        unsafe: run the kernel without a namespace sandbox where none can be made
            (it then sees what the grader's user sees); otherwise :class:`SandboxUnavailable`.
        language: the submission's language (one of :data:`~scalelib.course.i18n.LANGUAGES`), given to the
            kernel as ``SCALELIB_LANG``.

    Files the grader puts in :attr:`inbox` before the kernel starts are copied into its home.

    Raises:
        SandboxUnavailable: no sandbox can be made here and `unsafe` is false.
    """

    def __init__(self, memory_bytes: int | None, max_output_bytes: int, *, cpu_seconds: float | None = None,
                 home_bytes: int | None = None, unsafe: bool = False, language: str = "en"):
        self.language = trusted_language(language)
        self.memory_bytes = memory_bytes
        self.max_output_bytes = max_output_bytes
        self.cpu_seconds = cpu_seconds
        self.home_bytes = home_bytes
        self.unsafe = unsafe
        self.isolated = False
        self.home_limited = False
        self.user: _KernelUser | None = None  # in the namespace sandbox as root: the kernel's own user
        self.run_as: tuple[int, int] | None = None  # (uid, gid) of an --unsafe kernel run as root
        self.root: Path | None = None
        self.kernel_pid: int | None = None
        self.leftovers_killed = 0
        self.cgroup: _Cgroup | None = None
        self._process = None
        self._before: set[int] = set()
        self._own: set[int] = set()
        self._leftovers: set[int] = set()
        self._reaping = False
        self._log = None

    # -- set-up ---------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        ok, why = isolation()
        if not ok and not self.unsafe:
            raise SandboxUnavailable(f"no sandbox can be made for the grading kernels: {why}. Install bubblewrap, "
                                     f"or pass --unsafe (unsafe=True) to grade without one, knowing that each "
                                     f"notebook then runs with your user's rights")
        self.isolated = ok
        self.run_as = None if ok else fallback_user()
        self.root = Path(tempfile.mkdtemp(prefix="scalelib-grade-"))
        os.chmod(self.root, 0o755 if ok or self.run_as else 0o700)
        self.home.mkdir()
        (self.home / "tmp").mkdir()
        self.conn.mkdir()
        self.inbox.mkdir()
        package_copy(self.lib)
        owner = None
        if ok and os.geteuid() == 0:  # the namespace sandbox as root: a user of the kernel's own
            self.user = _KernelUser()
            owner = (self.user.uid, self.user.uid)
        elif self.run_as:  # no namespaces, as root (--unsafe): the unprivileged user KERNEL_USER_ENV names
            owner = self.run_as
        if owner:
            for folder in (self.home, self.home / "tmp", self.conn):
                os.chown(folder, *owner)
        self.home_limited = bool(ok and self.home_bytes and _bwrap_sizes_tmpfs())
        spec = self.root / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "scalelib.course.sandbox", "--lib", str(self.lib),
                "--max-output", str(int(self.max_output_bytes)), "--inbox", str(self.inbox)]
        if self.memory_bytes:
            argv += ["--memory", str(int(self.memory_bytes))]
        if self.cpu_seconds:
            argv += ["--cpu", str(int(math.ceil(self.cpu_seconds)))]
        if ok:
            self.cgroup = _Cgroup(self.memory_bytes)
            argv = self._wrapped(argv)
        elif self.run_as:
            argv = self._as_user(argv)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": argv + ["-f", "{connection_file}"],
            "display_name": "scalelib grading", "language": "python",
        }, indent=1))
        return self

    def _wrapped(self, argv: list[str]) -> list[str]:
        """`argv` run inside bubblewrap (joined to the cgroup and the connection file handed over first)."""
        made: set[str] = {"/", "/usr", "/tmp", "/proc", "/dev", "/etc"}
        args = ["bwrap", *_namespace_args(), "--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
            made.add(top)
        uid = self.user.uid if self.user else os.getuid()
        (self.root / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                          f"learner:x:{uid}:{uid}:learner:{self.home}:/usr/sbin/nologin\n"
                                          f"nobody:x:{NOBODY}:{NOBODY}:nobody:/nonexistent:/usr/sbin/nologin\n")
        (self.root / "group").write_text(f"root:x:0:\nlearner:x:{uid}:\nnogroup:x:{NOBODY}:\n")
        for name in ("passwd", "group"):
            os.chmod(self.root / name, 0o644)
        args += ["--perms", "0755", "--dir", "/etc", "--ro-bind", str(self.root / "passwd"), "/etc/passwd",
                 "--ro-bind", str(self.root / "group"), "/etc/group"]
        for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts", "/etc/nsswitch.conf"):
            args += ["--ro-bind-try", f, f]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]

        def parents(path: str) -> list[str]:
            out, parts = [], Path(path).parts
            for i in range(2, len(parts)):
                folder = str(Path(*parts[:i]))
                if folder not in made:
                    made.add(folder)
                    out += ["--perms", "0755", "--dir", folder]
            return out

        def covered(path: str) -> bool:
            return any(path == m or path.startswith(m.rstrip("/") + "/") for m in bound)

        bound: list[str] = ["/usr"]
        prefixes = [os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), sys.prefix,
                    str(Path(os.path.realpath(sys.executable)).parents[1])]
        for prefix in prefixes:
            if os.path.isdir(prefix) and not covered(prefix):
                args += parents(prefix) + ["--ro-bind", prefix, prefix]
                bound.append(prefix)
        for prefix in {sys.prefix, os.path.realpath(sys.prefix)}:
            args += _site_masks(Path(prefix))
        for folder, how in ((self.lib, "--ro-bind"), (self.inbox, "--ro-bind"), (self.conn, "--bind")):
            args += parents(str(folder)) + [how, str(folder), str(folder)]
        if self.home_limited:  # a home of its own size, in memory: what the kernel writes cannot fill the disk
            args += parents(str(self.home)) + ["--perms", "1777", "--size", str(int(self.home_bytes)), "--tmpfs",
                                               str(self.home), "--perms", "1777", "--dir", str(self.home / "tmp")]
        else:
            args += parents(str(self.home)) + ["--bind", str(self.home), str(self.home)]
        args += ["--chdir", str(self.home), *_drop_privileges(uid)]
        setup = []
        for procs in (self.cgroup.procs_files if self.cgroup else []):
            setup.append(f"echo $$ > {shlex.quote(procs)}")
        if os.geteuid() == 0:
            setup.append(f"chown {uid}:{uid} {shlex.quote(str(self.conn / 'kernel.json'))}")
        args[0] = shutil.which("bwrap") or "bwrap"
        if not setup:
            return args + argv
        return ["/bin/sh", "-c", "set -e; " + "; ".join(setup) + '; exec "$@"', "sh", *args, *argv]

    def _as_user(self, argv: list[str]) -> list[str]:
        """`argv` run as the unprivileged :attr:`run_as` user, with no capabilities (no namespaces: see the
        module's docstring), once the connection file is handed over to it."""
        uid, gid = self.run_as
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        drop = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all",
                "--inh-caps=-all", "--no-new-privs", "--"]
        handover = f"chown {uid}:{gid} {shlex.quote(str(self.conn / 'kernel.json'))}"
        return ["/bin/sh", "-c", f'set -e; {handover}; exec "$@"', "sh", *drop, *argv]

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def inbox(self) -> Path:
        """Where the grader puts the files the kernel finds in its home (read-only to the kernel)."""
        return self.root / "inbox"

    @property
    def conn(self) -> Path:
        """The folder of the kernel's connection file and IPC sockets (writable by the kernel)."""
        return self.root / "conn"

    @property
    def log_path(self) -> Path:
        return self.root / "kernel.log"

    def env(self) -> dict[str, str]:
        """The kernel's whole environment: nothing of the instructor's own."""
        python_bin = str(Path(sys.executable).parent)
        return {
            "PATH": os.pathsep.join([python_bin, "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(self.home),
            "TMPDIR": str(self.home / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "MPLBACKEND": "Agg",
            GRADING_ENV: "1",
            LANGUAGE_ENV: self.language,
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
                                connection_file=str(self.conn / "kernel.json"))
        if transport == "ipc":
            km.ip = str(self.conn / "ipc")
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
        self._process = process
        self.kernel_pid = getattr(process, "pid", None)

    def note_kernel_tree(self) -> None:
        """Note the processes the running kernel is made of (the sandbox's launcher, its init and the kernel),
        so that only what the notebook started is counted as left behind."""
        self._own = {self.kernel_pid} if self.kernel_pid else set()
        try:
            import psutil

            self._own.update(p.pid for p in psutil.Process(self.kernel_pid).children(recursive=True))
        except Exception:  # noqa: BLE001 - no psutil, or the kernel is gone
            pass

    def note_leftovers(self) -> None:
        """Note, while the kernel still runs, the processes the notebook started and left running."""
        now = _descendants() - self._before
        if self.cgroup:
            now |= self.cgroup.members()
        if self.user:
            now |= self.user.processes()
        self._leftovers = now - self._own - {os.getpid()}

    def death(self) -> str:
        """What ended the kernel, as far as the grader can tell (for a report: "it reached ...")."""
        if self.cgroup and self.cgroup.memory_exhausted():
            return f"it reached its memory limit of {_binary(self.memory_bytes)}"
        code = None
        if self._process is not None:
            for _ in range(50):
                code = self._process.poll()
                if code is not None:
                    break
                time.sleep(0.02)
        log = self.kernel_log(4000)
        if "MemoryError" in log or "std::bad_alloc" in log:
            return f"it ran out of memory (a limit of {_binary(self.memory_bytes)} applies)" if self.memory_bytes \
                else "it ran out of memory"
        if code is None:
            return "it stopped answering"
        if code < 0 or code > 128:
            number = -code if code < 0 else code - 128
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            return f"it was killed by {name}"
        return f"it exited with status {code}"

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
            if self.cgroup:
                pids.update(self.cgroup.members())
            if self.user:
                pids.update(self.user.processes())
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
        killed.discard(self.kernel_pid)
        return len((killed | self._leftovers) - self._own)

    def __exit__(self, *exc) -> None:
        try:
            self.leftovers_killed = self.kill_all()
        finally:
            if self._reaping:
                _set_subreaper(False)
            if self._log:
                self._log.close()
            if self.cgroup:
                self.cgroup.remove()
            if self.user:
                self.user.release()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)


def _binary(n) -> str:
    from .._units import fmt

    return fmt(n, "B", binary=True)


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
        last_execute_id = None  # the msg_id of the last execute request: whose output the grader waits for

        def execute(self, *args, **kwargs):
            self.last_execute_id = super().execute(*args, **kwargs)
            return self.last_execute_id

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
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--inbox", default="")
    args, rest = parser.parse_known_args(argv)
    try:
        import resource

        if args.memory:
            resource.setrlimit(resource.RLIMIT_AS, (args.memory, args.memory))
        if args.cpu:
            resource.setrlimit(resource.RLIMIT_CPU, (args.cpu, args.cpu + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        if os.geteuid() != 0:
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    except (ImportError, ValueError, OSError) as err:
        print(f"scalelib sandbox: could not set limits: {err}", file=sys.stderr)
    if args.inbox and os.path.isdir(args.inbox):  # the grader's files (the notebook's copy), into the kernel's home
        for name in os.listdir(args.inbox):
            source = os.path.join(args.inbox, name)
            if os.path.isfile(source) and not os.path.islink(source):
                try:
                    shutil.copyfile(source, os.path.join(os.getcwd(), name))
                except OSError as err:
                    print(f"scalelib sandbox: could not copy {name} into the home: {err}", file=sys.stderr)
    # Inside its PID namespace the kernel's parent is the sandbox's init (pid 1), never the grader: ipykernel
    # must not take that for an orphaned kernel (the grader kills the whole namespace when it is done).
    os.environ.pop("JPY_PARENT_PID", None)
    _isolate_imports(args.lib)
    _cap_output(args.max_output)
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance(argv=rest)


if __name__ == "__main__":
    main()
