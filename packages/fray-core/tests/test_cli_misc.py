"""``fray tpu``, ``fray doctor``, top-level behaviour, and keeping ``import fray`` light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fray.topology import TPU_TOPOLOGIES
from fray_cli_support import cli_env, fray, import_quietly

main = import_quietly("fray.cli").main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def test_tpu_list_shows_every_type(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tpu", "list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "TYPE",
        "GENERATION",
        "CHIPS",
        "HOSTS",
        "VMS",
        "CHIPS/VM",
        "HBM",
        "GiB",
    ]
    assert [row.split()[0] for row in rows] == list(TPU_TOPOLOGIES)
    v5e16 = next(row.split() for row in rows if row.startswith("v5litepod-16 "))
    assert v5e16 == ["v5litepod-16", "v5litepod", "16", "2", "4", "4", "256"]


def test_tpu_list_json_and_generation_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tpu", "list", "--generation", "v5e", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["generation"] for d in data} == {"v5litepod"}
    assert data[0]["name"] == "v5litepod-1"
    assert main(["tpu", "list", "--generation", "v9"]) == 2
    err = capsys.readouterr().err
    assert "argument --generation" in err and "v4, v5litepod, v5p, v6e" in err


def test_tpu_show_and_unknown_type(env: dict[str, str]) -> None:
    shown = fray(env, "tpu", "show", "V5E-16")
    assert shown.returncode == 0
    lines = dict(line.split(":", 1) for line in shown.stdout.splitlines())
    assert lines["type"].strip() == "v5litepod-16"
    assert lines["VMs"].strip().startswith("4 ")
    assert "LIBTPU_INIT_ARGS" in lines["default env"]
    unknown = fray(env, "tpu", "show", "v5p-7")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines()[0] == (
        "fray tpu show: error: argument TYPE: unknown TPU type 'v5p-7'; closest: v5p-8, "
        "v5p-16, v5p-64 (see 'fray tpu list')"
    )
    assert "Traceback" not in unknown.stderr


def test_tpu_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tpu", "show", "v6e-16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["chips"], data["vms"], data["chips_per_vm"], data["hbm_total_gib"]) == (
        16,
        4,
        4,
        512,
    )
    assert data["default_env"]["LIBTPU_INIT_ARGS"] == "--xla_tpu_scoped_vmem_limit_kib=98304"


def test_doctor_reports_backends_and_the_default_client(env: dict[str, str]) -> None:
    env["FRAY_TEST_API_KEY"] = "abcdefgh-secret"
    done = fray(env, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith("fray 0.1.0 on Python ")
    assert "  local  fray-core 0.1.0: ok" in out
    assert "client: local, because the default (no spec, no cluster)" in out
    assert f"state dir: {env['FRAY_STATE_DIR']}" in out
    assert "FRAY_TEST_API_KEY=***" in out and "abcdefgh-secret" not in out
    # One line per backend ("  name  ..."); an unavailable one adds an indented hint line.
    listing = out.split("backends:\n")[1].split("client:")[0].splitlines()
    schemes = [line.split()[0] for line in listing if line[2:3].strip()][:4]
    assert schemes == ["local", "ray", "iris", "fake"]


def test_doctor_explains_a_spec_without_connecting(env: dict[str, str]) -> None:
    env["FRAY_CLIENT_SPEC"] = "ray"
    done = fray(env, "doctor", "--json")
    report = json.loads(done.stdout)
    assert report["client"]["reason"] == "FRAY_CLIENT_SPEC='ray'"
    assert report["client"]["scheme"] == "ray"
    assert "client" not in report["client"]  # nothing was built: no cluster was contacted
    assert done.returncode == (1 if report["problems"] else 0)
    schemes = {row["scheme"]: row for row in report["backends"]}
    assert {"local", "ray", "iris", "fake"} <= set(schemes)
    assert schemes["local"]["available"] is True and schemes["local"]["version"] == "0.1.0"


def test_doctor_flags_a_bad_spec(env: dict[str, str]) -> None:
    env["FRAY_CLIENT_SPEC"] = "nosuch://host:1"
    done = fray(env, "doctor")
    assert done.returncode == 1
    assert "problem: FRAY_CLIENT_SPEC: 'nosuch' is not valid; unknown backend" in done.stdout


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: fray" in capsys.readouterr().err
    assert main(["jobs"]) == 2
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "fray 0.1.0"
    assert main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_import_fray_and_the_parser_stay_light() -> None:
    code = (
        "import sys, fray, fray.cli\n"
        "fray.cli.build_parser()\n"
        "heavy = [m for m in ('fsspec', 'ray', 'jax', 'iris', 'fray.local', 'fray.migrate') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_console_script_is_declared() -> None:
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "fray"]
    assert script.value == "fray.cli:main"


def test_a_bad_argument_is_one_line_and_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--cpu", "abc", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "usage:" not in err
    assert err.splitlines() == [
        "fray run: error: argument --cpu: invalid float value: 'abc'",
        "hint: see 'fray run --help'",
    ]


def test_a_bad_spec_flag_is_blamed_on_the_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FRAY_CLIENT_SPEC", raising=False)
    assert main(["run", "--spec", "foo://x", "--", "true"]) == 2
    first, hint = capsys.readouterr().err.splitlines()
    assert first.startswith("fray run: error: --spec: 'foo://x' is not valid; unknown backend")
    assert "FRAY_CLIENT_SPEC" not in first + hint
    monkeypatch.setenv("FRAY_CLIENT_SPEC", "foo")
    assert main(["jobs", "list"]) == 1
    assert "FRAY_CLIENT_SPEC: 'foo' is not valid" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--spec", "local?threads=0", "--", "true"],
        ["jobs", "list", "--spec", "local?threads=0"],
    ],
)
def test_a_bad_spec_parameter_is_blamed_on_the_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.delenv("FRAY_CLIENT_SPEC", raising=False)
    assert main(argv) == 2
    first, hint = capsys.readouterr().err.splitlines()
    assert first == (
        f"fray {argv[0]}{' list' if argv[0] == 'jobs' else ''}: error: --spec: "
        "'local?threads=0' is not valid; threads: must be an integer >= 1"
    )
    assert "FRAY_CLIENT_SPEC" not in hint


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["jobs", "stop", "no-such-job", "--timeout", "-1"], "--timeout"),
        (["jobs", "stop", "no-such-job", "--timeout", "soon"], "--timeout"),
        (["jobs", "wait", "no-such-job", "--timeout", "nan"], "--timeout"),
        (["jobs", "list", "--limit", "0"], "--limit"),
        (["run", "--tpu", "v4-8", "--slices", "0", "--", "true"], "--slices"),
        (["run", "--max-retries-preemption", "1.5", "--", "true"], "--max-retries-preemption"),
    ],
)
def test_a_bad_flag_value_is_refused_before_anything_else(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    flag: str,
) -> None:
    monkeypatch.setenv("FRAY_STATE_DIR", str(tmp_path / "state"))
    assert main(argv) == 2
    error, hint = capsys.readouterr().err.splitlines()
    assert f"error: argument {flag}: {argv[argv.index(flag) + 1]!r} is not valid" in error
    assert hint.startswith("hint: see 'fray ")
    assert not (tmp_path / "state").exists()
