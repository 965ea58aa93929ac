"""Test, lint and type-check sessions. Run everything with ``uv run nox``.

Each ``tests`` session installs one package with only its own dependencies (from
``uv.lock``), which is what proves, for example, that fray-core works without Ray.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "iris-3.12",
    "examples",
    "compat",
    "compat-3.12",
]

PACKAGES = ["fray-core", "fray-testing", "fray-tpu", "fray-ray", "fray-iris"]

# For every session that runs Fray: no accelerator probing, no ambient cluster or client, and
# Ray must not replicate the `uv run` environment to its workers (``uv run nox`` makes every
# driver a `uv run` descendant: Ray would then start workers through a job-wide py_executable
# and package the checkout as a working_dir, and ignore task-level pip envs).
_ENV = {
    "JAX_PLATFORMS": "cpu",
    "RAY_ADDRESS": "",
    "FRAY_CLIENT_SPEC": "",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}


def _pyenv_python(minor: str) -> str:
    """The newest pyenv-installed ``python<minor>`` (``$(pyenv root)/versions/<minor>*``).

    Machines of this project get Python 3.12 and 3.13 from pyenv, where uv does not look
    for interpreters (it would try to download one); ``FRAY_PYTHON_<minor>`` (e.g.
    ``FRAY_PYTHON_3_12``) names another. Falls back to the bare version, for uv to find.
    """
    explicit = os.environ.get(f"FRAY_PYTHON_{minor.replace('.', '_')}")
    if explicit:
        return explicit
    roots = [os.environ.get("PYENV_ROOT", "")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        found = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        roots.append(found.stdout.strip())
    roots.append(os.path.expanduser("~/.pyenv"))
    for root in filter(None, roots):
        candidates = glob.glob(os.path.join(root, "versions", f"{minor}*", "bin", f"python{minor}"))
        if candidates:
            return max(candidates, key=lambda path: [int(n) for n in re.findall(r"\d+", path)])
    return minor


# Every process the tests start (Ray workers, Iris tasks, actor hosts, CLI runs) imports Ray
# or Iris. Where PYTHONDONTWRITEBYTECODE is set (as on this project's machines), each would
# compile those modules from source again: `import iris.client.client` takes 5 s instead of
# 1.7 s, `import ray` 1.6 s instead of 0.8 s. The sessions install compiled (``_sync``) and
# let Python cache the workspace's own modules as it does by default.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# ``uv run`` names its own binary in UV: it works where pip put uv off PATH.
_UV = os.environ.get("UV") or "uv"


def _sync(session: nox.Session, *args: str) -> None:
    """Installs from the lockfile into the session's virtualenv, compiled to bytecode."""
    session.run_install(
        _UV,
        "sync",
        "--frozen",
        "--no-default-groups",
        "--compile-bytecode",
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


@nox.session(python="3.11")
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """Runs one package's tests with only that package and its dependencies installed."""
    _sync(session, "--package", package, "--group", "test")
    env = dict(_ENV)
    session.run(
        "python",
        "-m",
        "pytest",
        f"packages/{package}/tests",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=env,
    )


@nox.session(name="iris-3.12", python=_pyenv_python("3.12"))
def iris_312(session: nox.Session) -> None:
    """fray-iris's tests (its conformance run and integration tests included) on Python 3.12,
    against the marin-iris line Iris users run today (0.2.227; ``tests`` runs them on 3.11
    against 0.2.20), then the three example workloads on that Iris (``examples`` runs them on
    3.11). Arguments go to both pytest runs."""
    _sync(session, "--package", "fray-iris", "--group", "test")
    session.run(
        "python",
        "-m",
        "pytest",
        "packages/fray-iris/tests",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=dict(_ENV),
    )
    _sync(session, "--all-packages", "--group", "examples")
    session.run(
        "python",
        "-m",
        "pytest",
        "examples/tests",
        "--ignore=examples/tests/test_zephyr_example.py",
        "-k",
        "iris",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=dict(_ENV),
    )


# A CPU-bound loop that also ends once the process that started it is gone (nox killed).
_BUSY_LOOP = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


@nox.session(python="3.11")
@nox.parametrize("package", PACKAGES)
def stress(session: nox.Session, package: str) -> None:
    """One package's tests beside two CPU-bound busy loops (not a default session).

    On a machine with a core or two to spare every race looks won; here the tests' threads
    and processes must compete for the CPU, as on a busy CI runner. ``uv run nox -s stress``
    runs every package's; one package: ``uv run nox -s "stress(package='fray-ray')"``.
    Arguments go to pytest: ``uv run nox -s stress -- -x -k terminate``.
    """
    _sync(session, "--package", package, "--group", "test")
    busy = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]) for _ in range(2)]
    session.log(f"busy loops: pids {' '.join(str(p.pid) for p in busy)}")
    try:
        session.run(
            "python",
            "-m",
            "pytest",
            f"packages/{package}/tests",
            "-p",
            "no:cacheprovider",
            *session.posargs,
            env=dict(_ENV),
        )
    finally:
        for proc in busy:
            proc.kill()
        for proc in busy:
            proc.wait()


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole workspace, and each package's size:
    syntax-tree nodes within its limit, docstrings at least 12 % of its lines."""
    _sync(session, "--only-group", "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/size.py", "--check")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """pyright: strict for fray-core and fray-testing, standard for the adapters."""
    _sync(session, "--all-packages", "--group", "lint")
    session.run("pyright")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmarks against the DESIGN.md targets (not a default session).

    ``uv run nox -s bench -- --only local --repeats 9``: arguments go to benchmarks/run.py.
    """
    _sync(session, "--all-packages", "--all-groups")
    env = dict(_ENV)
    session.run("python", "benchmarks/run.py", *session.posargs, env=env)


@nox.session(python="3.11")
def examples(session: nox.Session) -> None:
    """Runs the example workloads (train, rl, pipeline) on local, Ray and Iris.

    Each test runs ``python examples/<name>.py`` with ``FRAY_CLIENT_SPEC`` set, against a
    local Ray and an in-process Iris cluster that the tests start, and checks the outputs.
    With every package installed, it also runs fray-core's checks that need the others
    (the predecessor's ``fray.iris_backend`` names, backend discovery), which ``tests``
    skips there.
    """
    _sync(session, "--all-packages", "--group", "examples")
    env = dict(_ENV)
    session.run(
        "python",
        "-m",
        "pytest",
        "examples/tests",
        "packages/fray-core/tests/compat",
        "packages/fray-core/tests/test_client_resolution.py",
        "--ignore=examples/tests/test_zephyr_example.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=env,
    )


# Marin's Zephyr, as Marin installs it today, but with fray-core in marin-fray's place.
ZEPHYR = "marin-zephyr==0.2.20.dev202606180959"


@nox.session(python="3.11")
def compat(session: nox.Session) -> None:
    """Marin's Zephyr 0.2.20 on Fray: real pipelines on local, Ray and Iris.

    The wheel is installed with ``--no-deps`` (its metadata pins ``marin-fray``, which must
    not be installed beside fray-core: both are the ``fray`` import); its other requirements
    come from the ``zephyr`` dependency group.
    """
    _sync(session, "--all-packages", "--group", "examples", "--group", "zephyr")
    session.run_install(
        _UV,
        "pip",
        "install",
        "--no-deps",
        ZEPHYR,
        env={"VIRTUAL_ENV": session.virtualenv.location},
        external=True,
    )
    env = dict(_ENV, MARIN_PREFIX=session.create_tmp())
    session.run(
        "python",
        "-m",
        "pytest",
        "examples/tests/test_zephyr_example.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=env,
    )


# The line of Marin's wheels Marin runs today (Python 3.12+), with fray-core in marin-fray's
# place: the wheels whose code `compat-3.12` runs.
MARIN_227 = "0.2.227.dev40316220070"
MARIN_227_WHEELS = [f"marin-zephyr=={MARIN_227}", f"marin-core=={MARIN_227}"]


@nox.session(name="compat-3.12", python=_pyenv_python("3.12"))
def compat_312(session: nox.Session) -> None:
    """Marin's 0.2.227 line on Fray, on Python 3.12: Zephyr 0.2.227 pipelines on local, Ray
    and Iris (``examples/zephyr_pipeline.py --more``; on local, the workers' teardown logs
    nothing at WARNING or above), and Marin's ``StepRunner`` on a three-step graph on the
    local backend.

    ``marin-zephyr`` and ``marin-core`` are installed with ``--no-deps`` (their metadata pins
    ``marin-fray``, which must not be installed beside fray-core: both are the ``fray``
    import); what their code imports comes from the lockfile (the ``marin-227`` group;
    marin-iris 0.2.227 and its line's packages with fray-iris). Arguments go to pytest.
    """
    _sync(session, "--all-packages", "--group", "examples", "--group", "marin-227")
    session.run_install(
        _UV,
        "pip",
        "install",
        "--no-deps",
        *MARIN_227_WHEELS,
        env={"VIRTUAL_ENV": session.virtualenv.location},
        external=True,
    )
    env = dict(_ENV, MARIN_PREFIX=session.create_tmp())
    session.run(
        "python",
        "-m",
        "pytest",
        "examples/tests/test_zephyr_227.py",
        "examples/tests/test_marin_step_runner.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env=env,
    )
