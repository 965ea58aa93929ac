"""Process-group guardian for local subprocess jobs. Standard library only.

Run as ``python _reaper.py PARENT_PID -- ARGV...``. The local backend starts it as the leader
of a new session; it runs ARGV in that session's process group and exits with ARGV's status
(re-raising ARGV's fatal signal on itself, so the parent sees the same signal). It exists so
that a job never outlives the process that started it: when that process dies, however
abruptly, the kernel signals this guardian (``PR_SET_PDEATHSIG``) and it tears the whole
group down. SIGTERM sent to the group reaches ARGV, which may shut down gracefully; the
guardian itself ignores it and keeps waiting. When ARGV exits, whatever it left running in
the group is killed: a job is its whole process tree.
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1
_GRACE_S = 2.0


def _set_parent_death_signal(sig: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _kill_group(child: "subprocess.Popen[bytes] | None") -> None:
    """SIGTERM to the group, then SIGKILL once ``child`` has exited or the grace is over
    (the whole grace where the child is not known)."""
    group = os.getpgid(0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while (child is None or child.poll() is None) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)


def _kill_rest_of_group() -> None:
    """SIGKILLs every other process of this group: what ARGV left running in the background
    ends with the job (and stops holding the job's output pipe open)."""
    me = os.getpid()
    group = os.getpgid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or not ours
            if os.getpgid(int(entry)) == group:
                os.kill(int(entry), signal.SIGKILL)


def main() -> None:
    parent = int(sys.argv[1])
    argv = sys.argv[3:]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _set_parent_death_signal(signal.SIGUSR1)
    child_box: list[subprocess.Popen[bytes]] = []

    def on_parent_death(_signum: int, _frame: object) -> None:
        # Not only once Popen has returned: ARGV runs from its exec on, and on a busy
        # machine its output can reach the parent, and the parent die, before that.
        _kill_group(child_box[0] if child_box else None)
        os._exit(137)

    signal.signal(signal.SIGUSR1, on_parent_death)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(137)

    def child_setup() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        _set_parent_death_signal(signal.SIGTERM)

    try:
        child = subprocess.Popen(argv, preexec_fn=child_setup)
    except OSError as err:
        sys.stderr.write(f"fray: cannot start {argv[0]!r}: {err}\n")
        sys.stderr.flush()
        os._exit(127)
    child_box.append(child)
    code = child.wait()  # retried on EINTR (PEP 475); SIGUSR1's handler never returns
    _kill_rest_of_group()

    if code < 0:
        sys.stdout.flush()
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
