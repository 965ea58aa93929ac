"""How the job wrapper sets and restores environment variables in a worker process
(``fray_ray._environ._Environment``), on its own: no Ray needed. What matters is that the C
environment (what subprocesses inherit) and ``os.environ`` always agree, and that setting a
new value every job does not keep the old ones."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fray_ray._environ import _Environment

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the C environment path is POSIX")

NAMES = ("FRAY_ENVTEST_JOB", "FRAY_ENVTEST_OTHER")


def c_getenv(name: str) -> str | None:
    """The variable as the C library has it, not as ``os.environ`` remembers it."""
    getenv = ctypes.CDLL(None).getenv
    getenv.argtypes = [ctypes.c_char_p]
    getenv.restype = ctypes.c_char_p
    value = getenv(name.encode())
    return None if value is None else value.decode()


def c_getenv_address(name: str) -> int | None:
    getenv = ctypes.CDLL(None).getenv
    getenv.argtypes = [ctypes.c_char_p]
    getenv.restype = ctypes.c_void_p
    return getenv(name.encode())


def inherited(*names: str) -> dict[str, str | None]:
    """The variables as a subprocess started now inherits them."""
    code = "import json, os, sys; print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))"
    out = subprocess.run(
        [sys.executable, "-c", code, *names], capture_output=True, text=True, check=True
    )
    import json

    return json.loads(out.stdout)


@pytest.fixture
def env() -> Iterator[_Environment]:
    for name in NAMES:
        os.environ.pop(name, None)
    yield _Environment(fresh=["FRAY_ENVTEST_JOB"])
    for name in NAMES:
        os.environ.pop(name, None)


def test_set_values_reach_os_environ_the_c_environment_and_subprocesses(env: _Environment):
    undo = env.swap([("FRAY_ENVTEST_JOB", "job-1"), ("FRAY_ENVTEST_OTHER", "x")])
    assert os.environ["FRAY_ENVTEST_JOB"] == "job-1"
    assert c_getenv("FRAY_ENVTEST_JOB") == "job-1"
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": "job-1", "FRAY_ENVTEST_OTHER": "x"}
    assert env.get("FRAY_ENVTEST_OTHER") == "x"

    env.restore(undo)
    assert "FRAY_ENVTEST_JOB" not in os.environ
    assert c_getenv("FRAY_ENVTEST_JOB") is None and c_getenv("FRAY_ENVTEST_OTHER") is None
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}
    assert env.get("FRAY_ENVTEST_JOB") is None


def test_a_new_value_every_job_is_written_into_one_slot_and_nothing_is_kept(
    env: _Environment,
):
    # A variable the process did not have lives in a string the environment points into,
    # given each job's value in place and hidden after it: no copy of any value is kept
    # (glibc's setenv would keep every one of them) and the C library is not called again.
    for i in range(2_000):
        undo = env.swap([("FRAY_ENVTEST_JOB", f"noop-{i:08x}"), ("FRAY_ENVTEST_OTHER", "0")])
        assert c_getenv("FRAY_ENVTEST_JOB") == f"noop-{i:08x}"
        slots = env._slots  # pyright: ignore[reportPrivateUsage]
        assert set(slots) == {b"FRAY_ENVTEST_JOB", b"FRAY_ENVTEST_OTHER"}
        if i == 0:
            first = {key: slot.address() for key, slot in slots.items() if slot}
        for key, slot in slots.items():
            assert slot is not None and slot.address() == first[key]
            assert c_getenv_address(key.decode()) == first[key] + len(key) + 1
        env.restore(undo)
        assert c_getenv("FRAY_ENVTEST_JOB") is None and "FRAY_ENVTEST_JOB" not in os.environ
        assert not env._owned  # pyright: ignore[reportPrivateUsage]
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}


def test_a_value_too_long_for_its_slot_is_set_and_restored_the_ordinary_way(
    env: _Environment,
):
    long = "x" * 1_000
    undo = env.swap([("FRAY_ENVTEST_JOB", "short")])
    env.restore(undo)
    undo = env.swap([("FRAY_ENVTEST_JOB", long), ("FRAY_ENVTEST_OTHER", long)])
    assert c_getenv("FRAY_ENVTEST_JOB") == long and c_getenv("FRAY_ENVTEST_OTHER") == long
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": long, "FRAY_ENVTEST_OTHER": long}
    env.restore(undo)
    assert c_getenv("FRAY_ENVTEST_JOB") is None and c_getenv("FRAY_ENVTEST_OTHER") is None
    assert not env._owned  # pyright: ignore[reportPrivateUsage]
    undo = env.swap([("FRAY_ENVTEST_JOB", "short again")])  # the slot serves again
    assert c_getenv("FRAY_ENVTEST_JOB") == "short again"
    env.restore(undo)
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}


def test_a_job_that_sets_or_removes_a_variable_itself_leaves_nothing_behind(
    env: _Environment,
):
    undo = env.swap([("FRAY_ENVTEST_JOB", "job-1"), ("FRAY_ENVTEST_OTHER", "x")])
    os.environ["FRAY_ENVTEST_JOB"] = "set by the job"
    del os.environ["FRAY_ENVTEST_OTHER"]
    env.restore(undo)
    assert c_getenv("FRAY_ENVTEST_JOB") is None and c_getenv("FRAY_ENVTEST_OTHER") is None
    assert "FRAY_ENVTEST_JOB" not in os.environ and "FRAY_ENVTEST_OTHER" not in os.environ
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}
    undo = env.swap([("FRAY_ENVTEST_JOB", "job-2"), ("FRAY_ENVTEST_OTHER", "y")])
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": "job-2", "FRAY_ENVTEST_OTHER": "y"}
    env.restore(undo)
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}
    # Set between jobs (through os.environ): the job's value replaces it, then it comes back.
    os.environ["FRAY_ENVTEST_JOB"] = "between jobs"
    undo = env.swap([("FRAY_ENVTEST_JOB", "job-3")])
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": "job-3"}
    env.restore(undo)
    assert c_getenv("FRAY_ENVTEST_JOB") == "between jobs"
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": "between jobs"}


def test_a_value_the_process_had_comes_back(env: _Environment):
    os.environ["FRAY_ENVTEST_OTHER"] = "worker's own"
    undo = env.swap([("FRAY_ENVTEST_OTHER", "the job's"), ("FRAY_ENVTEST_JOB", None)])
    assert inherited("FRAY_ENVTEST_OTHER") == {"FRAY_ENVTEST_OTHER": "the job's"}
    env.restore(undo)
    assert os.environ["FRAY_ENVTEST_OTHER"] == "worker's own"
    assert c_getenv("FRAY_ENVTEST_OTHER") == "worker's own"
    os.environ["FRAY_ENVTEST_JOB"] = "an outer job"  # a fresh variable comes back too
    undo = env.swap([("FRAY_ENVTEST_JOB", "job-4")])
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": "job-4"}
    env.restore(undo)
    assert c_getenv("FRAY_ENVTEST_JOB") == "an outer job"
    assert os.environ["FRAY_ENVTEST_JOB"] == "an outer job"
    # Code in the job may change the variable itself; restoring still works.
    undo = env.swap([("FRAY_ENVTEST_OTHER", "the job's")])
    os.environ["FRAY_ENVTEST_OTHER"] = "changed by the job"
    env.restore(undo)
    assert c_getenv("FRAY_ENVTEST_OTHER") == "worker's own"
    assert os.environ["FRAY_ENVTEST_OTHER"] == "worker's own"


def test_a_variable_that_already_has_its_value_is_left_alone(env: _Environment):
    os.environ["FRAY_ENVTEST_OTHER"] = "cpu"
    undo = env.swap([("FRAY_ENVTEST_OTHER", "cpu"), ("FRAY_ENVTEST_JOB", "job-2")])
    assert [key for key, _ in undo] == [b"FRAY_ENVTEST_JOB"]
    env.restore(undo)
    assert os.environ["FRAY_ENVTEST_OTHER"] == "cpu" and c_getenv("FRAY_ENVTEST_OTHER") == "cpu"


def test_names_and_values_the_environment_cannot_hold_are_refused_and_nothing_stays_set(
    env: _Environment,
):
    with pytest.raises(ValueError, match="null"):
        env.swap([("FRAY_ENVTEST_JOB", "job-3"), ("FRAY_ENVTEST_OTHER", "a\0b")])
    with pytest.raises(ValueError, match="null"):
        env.swap([("FRAY_ENVTEST_OTHER", "x"), ("FRAY_ENVTEST_JOB", "job\0-3")])
    with pytest.raises(ValueError, match="name"):
        env.swap([("FRAY_ENVTEST_JOB", "job-3"), ("FRAY=ENVTEST", "x")])
    assert c_getenv("FRAY_ENVTEST_JOB") is None and "FRAY_ENVTEST_JOB" not in os.environ
    assert c_getenv("FRAY_ENVTEST_OTHER") is None and not env._owned  # pyright: ignore[reportPrivateUsage]
    assert inherited(*NAMES) == {"FRAY_ENVTEST_JOB": None, "FRAY_ENVTEST_OTHER": None}


def test_a_swap_within_a_swap_restores_both(env: _Environment):
    outer = env.swap([("FRAY_ENVTEST_JOB", "outer")])
    inner = env.swap([("FRAY_ENVTEST_JOB", "inner")])
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": "inner"}
    env.restore(inner)
    assert c_getenv("FRAY_ENVTEST_JOB") == "outer" and os.environ["FRAY_ENVTEST_JOB"] == "outer"
    env.restore(outer)
    assert c_getenv("FRAY_ENVTEST_JOB") is None and "FRAY_ENVTEST_JOB" not in os.environ
    undo = env.swap([("FRAY_ENVTEST_JOB", "after")])
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": "after"}
    env.restore(undo)
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": None}


def test_a_swap_within_a_swap_that_unsets_the_variable_restores_both(env: _Environment):
    outer = env.swap([("FRAY_ENVTEST_JOB", "outer")])
    inner = env.swap([("FRAY_ENVTEST_JOB", None)])
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": None}
    env.restore(inner)
    assert c_getenv("FRAY_ENVTEST_JOB") == "outer" and os.environ["FRAY_ENVTEST_JOB"] == "outer"
    env.restore(outer)
    assert c_getenv("FRAY_ENVTEST_JOB") is None and "FRAY_ENVTEST_JOB" not in os.environ
    assert inherited("FRAY_ENVTEST_JOB") == {"FRAY_ENVTEST_JOB": None}
