"""Spec parsing, the backend registry and current_client()'s resolution order."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

import fray
from fray import (
    InvalidRequestError,
    LocalClient,
    current_client,
    set_current_client,
)
from fray.backend import ClientSpec, client_from_spec, parse_client_spec, register_backend


@pytest.mark.parametrize(
    ("spec", "scheme", "address", "params"),
    [
        ("local", "local", None, {}),
        ("local?threads=4", "local", None, {"threads": "4"}),
        ("ray", "ray", None, {}),
        ("ray?namespace=exp1", "ray", None, {"namespace": "exp1"}),
        ("ray://10.0.0.1:10001", "ray", "10.0.0.1:10001", {}),
        ("iris://localhost:8080?ws=/tmp/w", "iris", "localhost:8080", {"ws": "/tmp/w"}),
        ("fake", "fake", None, {}),
        (" LOCAL ", "local", None, {}),
    ],
)
def test_spec_grammar(spec: str, scheme: str, address: str | None, params: dict[str, str]) -> None:
    parsed = parse_client_spec(spec)
    assert (parsed.scheme, parsed.address, parsed.params) == (scheme, address, params)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "use one of"),
        ("ray://", "host:port"),
        ("ray://a/b", "host:port"),
        ("local?threads", "key=value"),
        ("local?threads=1&threads=2", "given twice"),
        ("9lives", "use one of"),
    ],
)
def test_bad_specs(spec: str, fragment: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_client_spec(spec)
    assert info.value.field == "FRAY_CLIENT_SPEC"
    assert fragment in str(info.value)


def test_unknown_scheme_lists_known_backends() -> None:
    with pytest.raises(InvalidRequestError) as info:
        client_from_spec("kubernetes")
    message = str(info.value)
    assert "unknown backend" in message
    for scheme in ("local", "ray", "iris", "fake"):
        assert scheme in message


def test_local_spec_params() -> None:
    client = client_from_spec("local?threads=3")
    try:
        assert isinstance(client, LocalClient) and client.max_threads == 3
    finally:
        client.shutdown()
    with pytest.raises(InvalidRequestError, match=r"client_from_spec.spec.threads: 'zero'"):
        client_from_spec("local?threads=zero")
    with pytest.raises(InvalidRequestError, match=r"--spec.threads: 'zero'"):
        client_from_spec("local?threads=zero", "--spec")
    for bad in (None, 123, b"local"):
        with pytest.raises(InvalidRequestError, match=r"client_from_spec.spec: "):
            client_from_spec(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="must be an integer >= 1"):
        client_from_spec("local?threads=0")
    with pytest.raises(InvalidRequestError, match="unknown parameter 'workers'"):
        client_from_spec("local?workers=2")
    with pytest.raises(InvalidRequestError, match="takes no address"):
        client_from_spec("local://host:1")


def test_missing_backend_gives_exact_install_line() -> None:
    # A fresh interpreter where the backend package cannot be imported.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["fray_iris"] = None  # as if fray-iris were not installed
        from fray import BackendUnavailableError
        from fray.backend import client_from_spec
        try:
            client_from_spec("iris://127.0.0.1:1")
        except BackendUnavailableError as err:
            print(err)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "fray-core[iris]"' in out.stdout
    assert "fray-iris, which is not installed" in out.stdout


def test_register_backend_and_entry() -> None:
    made: list[ClientSpec] = []

    def factory(spec: ClientSpec) -> LocalClient:
        made.append(spec)
        return LocalClient()

    register_backend("mine", factory)
    client = client_from_spec("mine?x=1")
    client.shutdown()
    assert made[0].params == {"x": "1"}
    with pytest.raises(InvalidRequestError, match="simple name"):
        register_backend("not valid", factory)


def test_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    default = current_client()
    assert isinstance(default, LocalClient)
    assert current_client() is default  # shared per process, so get_job keeps working

    monkeypatch.setenv("FRAY_CLIENT_SPEC", "local?threads=2")
    from_env = current_client()
    assert isinstance(from_env, LocalClient) and from_env.max_threads == 2

    explicit = LocalClient(max_threads=7)
    with set_current_client(explicit) as chosen:
        assert chosen is explicit
        assert current_client() is explicit  # explicit beats the env var
    assert current_client() is from_env

    with pytest.raises(RuntimeError), set_current_client(explicit):
        raise RuntimeError("boom")
    assert current_client() is from_env  # restored on exception

    monkeypatch.setenv("FRAY_CLIENT_SPEC", "bogus")
    with pytest.raises(InvalidRequestError, match="unknown backend"):
        current_client()
    for c in (default, from_env, explicit):
        c.shutdown()


def test_shut_down_default_is_replaced() -> None:
    first = current_client()
    first.shutdown()
    second = current_client()
    assert second is not first and not second.is_shutdown
    second.shutdown()


def test_iris_context_without_fray_iris_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # fray-iris installed (its context hook registered) but failing to import.
    pytest.importorskip("fray_iris")
    monkeypatch.setenv("IRIS_CONTROLLER_ADDRESS", "http://127.0.0.1:1")
    monkeypatch.setenv("IRIS_TASK_ID", "/u/job/0")
    monkeypatch.setitem(sys.modules, "fray_iris", None)
    monkeypatch.setattr(fray._client, "_contexts", None)  # the hooks are read once: again
    client = current_client()
    assert isinstance(client, LocalClient)
    # The hook cannot be loaded, or (loaded by an earlier test) cannot build the client.
    said = ("iris backend's context check could not be loaded", "running inside an Iris job, but")
    assert any(text in caplog.text for text in said), caplog.text


def test_ray_only_when_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeRay:
        @staticmethod
        def is_initialized() -> bool:
            return False

    monkeypatch.setitem(sys.modules, "ray", FakeRay)
    assert isinstance(current_client(), LocalClient)
    FakeRay.is_initialized = staticmethod(lambda: True)  # type: ignore[method-assign]

    class StubRayClient:
        scheme = "ray"
        is_shutdown = False

    made: list[str] = []

    def fake_factory(spec: str) -> StubRayClient:
        made.append(spec)
        return StubRayClient()

    monkeypatch.setattr(fray._client, "client_from_spec", fake_factory)
    chosen = current_client()
    fray._client.forget_default(chosen)
    assert chosen.scheme == "ray"  # Ray is initialised: the ray backend is chosen
    assert made == ["ray"]


def test_import_fray_is_light() -> None:
    code = (
        "import sys, fray\n"
        "heavy = [m for m in ('ray', 'jax', 'iris', 'fsspec', 'fray_ray', 'fray_iris', "
        "'fray_tpu', 'fray_testing', 'cloudpickle', 'fray.local', 'pydantic', 'fray._types') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_names() -> None:
    public = {name for name in dir(fray) if not name.startswith("_")}
    public -= {"annotations", "environment_variables", "errors", "TYPE_CHECKING", "Any"}
    public -= {n for n in public if isinstance(getattr(fray, n), types.ModuleType)}
    assert set(fray.__all__) == public | {"LocalClient", "current_job_id", "task_index"}
    for name in fray.__all__:
        assert getattr(fray, name) is not None
