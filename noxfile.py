"""Test, lint and type-check sessions. Run everything with ``uv run nox``.

Each ``tests`` session installs one package with only its own dependencies (from
``uv.lock``), which is what proves, for example, that fray-core works without Ray.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

PACKAGES = ["fray-core", "fray-testing", "fray-tpu", "fray-ray", "fray-iris"]


def _sync(session: nox.Session, *args: str) -> None:
    """Installs from the lockfile into the session's virtualenv."""
    session.run_install(
        "uv",
        "sync",
        "--frozen",
        "--no-default-groups",
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


@nox.session(python="3.11")
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """Runs one package's tests with only that package and its dependencies installed."""
    _sync(session, "--package", package, "--group", "test")
    env = {"JAX_PLATFORMS": "cpu", "RAY_ADDRESS": "", "FRAY_CLIENT_SPEC": ""}
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


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole workspace."""
    _sync(session, "--only-group", "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """pyright: strict for fray-core and fray-testing, standard for the adapters."""
    _sync(session, "--all-packages", "--group", "lint")
    session.run("pyright")
