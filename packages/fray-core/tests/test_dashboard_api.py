"""``fray dashboard``'s JSON API through Starlette's test client: real local jobs, the seeded
scenario, a source of 10,000 jobs, one that raises and one that hangs; every answer bounded;
secrets never in an answer; recorded local runs after their client is gone; the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import fray
from fray import Entrypoint, JobInfo, JobRequest, JobStatus, LocalClient, current_client
from fray.cli import main
from fray.dashboard import (
    ClientSource,
    Dashboard,
    GangView,
    GroupView,
    HostState,
    HostView,
    MemberState,
    MemberView,
    MemorySource,
    RunStoreSource,
    SliceView,
    create_app,
    serve,
)
from fray.errors import ActorError
from fray_cli_support import FRAY, cli_env, read_line, stop
from test_dashboard_seed import FAILED_ERROR, IDS, PENDING_REASON, big_source, scenario_source

SECRET = "s3cr3t-value-9876"


class Broken:
    """A source whose backend is unreachable: every question raises."""

    name = "broken"

    def _raise(self, *_: object) -> Any:
        raise ConnectionError("iris://10.0.0.1:10000 refused the connection")

    jobs = job = logs = groups = gangs = _raise


class Hanging(Broken):
    """A source that never answers until released."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()

    def jobs(self) -> Sequence[JobInfo]:
        self.release.wait(60)
        return []


def _ok() -> str:
    print("[0] step 1 done")
    return "ok"


def _fail() -> None:
    print(f"token is {SECRET}")
    raise ValueError(f"bad shard (API_TOKEN={SECRET})")


def _parent() -> None:
    client = current_client()
    kids = [
        client.submit(JobRequest(name=f"kid-{i}", entrypoint=Entrypoint.from_callable(_ok)))
        for i in range(3)
    ]
    fray.wait_all(kids)


def _request(name: str, fn: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn))


@pytest.fixture(scope="module")
def local() -> Iterator[LocalClient]:
    """A live LocalClient with a succeeded job, a failed one and a parent of three."""
    mp = pytest.MonkeyPatch()
    mp.setenv("API_TOKEN", SECRET)
    client = LocalClient(echo_logs=False)
    jobs = [client.submit(_request(n, f)) for n, f in (("ok", _ok), ("bad", _fail))]
    jobs.append(client.submit(_request("parent", _parent)))
    fray.wait_all(jobs, raise_on_failure=False, timeout=60)
    yield client
    client.shutdown()
    mp.undo()


@pytest.fixture(scope="module")
def api(local: LocalClient) -> Iterator[TestClient]:
    mp = pytest.MonkeyPatch()
    mp.setenv("API_TOKEN", SECRET)
    dashboard = Dashboard(
        [ClientSource(local), scenario_source(), big_source(), Broken()], timeout=30
    )
    with TestClient(create_app(dashboard)) as test_client:
        yield test_client
    dashboard.close()
    mp.undo()


def _get(api: TestClient, path: str, **params: Any) -> dict[str, Any]:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _ids(answer: dict[str, Any]) -> list[str]:
    return [row["id"] for row in answer["jobs"]]


def test_a_page_of_10000_jobs_is_50_rows_under_64_kb(api: TestClient) -> None:
    response = api.get("/api/jobs", params={"source": "big", "limit": 50})
    assert response.status_code == 200
    assert len(response.content) < 64 * 1024
    answer = response.json()
    assert (answer["total"], len(answer["jobs"])) == (10_000, 50)
    assert answer["jobs"][0]["id"].startswith("job-09999")  # newest first
    assert len(_get(api, "/api/jobs")["jobs"]) == 50  # the default limit, all sources
    page = _get(api, "/api/jobs", source="big", offset=9_990, limit=500)
    assert [row["id"][:9] for row in page["jobs"]] == [f"job-{i:05d}" for i in range(9, -1, -1)]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": 501}, "limit: '501' is not valid; a whole number from 1 to 500"),
        ({"limit": 0}, "limit: '0' is not valid; a whole number from 1 to 500"),
        ({"offset": -1}, "offset: '-1' is not valid; a whole number from 0 to"),
        ({"state": "done"}, "state: 'done' is not valid; one of pending, running, succeeded"),
        ({"source": "nope"}, "source: 'nope' is not valid; one of local, seeded, big, broken"),
    ],
)
def test_a_bad_parameter_is_400_naming_it(
    api: TestClient, params: dict[str, Any], message: str
) -> None:
    response = api.get("/api/jobs", params=params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


def test_no_answer_carries_more_than_500_rows(api: TestClient) -> None:
    members = [MemberView(f"w-{i}", MemberState.READY) for i in range(2_000)]
    hosts = [HostView(i, HostState.RUNNING) for i in range(1_000)]
    wide = MemorySource(
        "wide",
        [JobInfo(job_id="x-1", name="x", status=JobStatus.RUNNING, submitted_at=1.0)],
        logs={"x-1": [f"line {i} " + "y" * 5_000 for i in range(5_000)]},
        groups=[GroupView(f"g{i}", members, "x-1") for i in range(3)],
        gangs=[GangView("x-1", "v4-2048", [SliceView(s, f"s{s}", hosts) for s in range(2)])],
    )
    dashboard = Dashboard([wide])
    with TestClient(create_app(dashboard)) as wide_api:
        groups = _get(wide_api, "/api/actors", limit=500)["groups"]
        assert sum(g["ready"] for g in groups) == 6_000  # counts are whole
        assert len(groups) + sum(len(g["members"]) for g in groups) <= 500
        gangs = _get(wide_api, "/api/gangs", limit=500)["gangs"]
        assert sum(len(s["hosts"]) for g in gangs for s in g["slices"]) < 500
        detail = _get(wide_api, "/api/jobs/x-1")
        nested = sum(len(g["members"]) for g in detail["groups"])
        assert nested + sum(len(s["hosts"]) for s in detail["gang"]["slices"]) <= 500
        logs = _get(wide_api, "/api/jobs/x-1/logs", tail=1_000)
        assert len(logs["lines"]) == 1_000 and logs["cut"] == 1_000
        assert logs["lines"][-1].startswith("line 4999 ") and len(logs["lines"][-1]) == 2_000
        assert len(_get(wide_api, "/api/jobs/x-1/logs")["lines"]) == 200  # the default tail
        assert wide_api.get("/api/jobs/x-1/logs", params={"tail": 1_001}).status_code == 400
    dashboard.close()


def test_an_unreachable_source_is_200_with_its_error_and_the_rest_answer(
    api: TestClient,
) -> None:
    refused = "ConnectionError: iris://10.0.0.1:10000 refused the connection"
    error = {"source": "broken", "error": refused}
    jobs = _get(api, "/api/jobs")
    assert jobs["errors"] == [error] and jobs["jobs"]
    assert _get(api, "/api/actors")["errors"] == [error]
    assert _get(api, "/api/gangs")["errors"] == [error]
    assert _get(api, f"/api/jobs/{IDS['failed']}")["errors"] == [error]
    sources = {s["name"]: s for s in _get(api, "/api/sources")["sources"]}
    assert sources["broken"]["error"] == error["error"] and sources["big"]["jobs"] == 10_000
    only = api.get("/api/jobs", params={"source": "broken"})
    assert only.status_code == 200 and only.json()["jobs"] == []


def test_a_source_that_does_not_answer_is_reported_after_the_timeout() -> None:
    hanging = Hanging()
    dashboard = Dashboard([scenario_source(), hanging], timeout=0.5)
    try:
        answer = dashboard.jobs({})
        assert answer["errors"] == [{"source": "hanging", "error": "did not answer within 0.5s"}]
        assert answer["total"] == 9  # the seeded top-level jobs
    finally:
        hanging.release.set()
        dashboard.close()


def test_the_seeded_rows_show_state_failures_preemptions_and_reason(api: TestClient) -> None:
    rows = {row["id"]: row for row in _get(api, "/api/jobs", source="seeded")["jobs"]}
    assert rows[IDS["preempted"]]["preemptions"] == 3
    assert rows[IDS["preempted"]]["failures"] == 0
    assert rows[IDS["flaky"]]["failures"] == 1
    assert rows[IDS["failed"]]["reason"] == FAILED_ERROR  # its first line only
    assert rows[IDS["pending"]]["reason"] == PENDING_REASON
    assert rows[IDS["parent"]]["children"] == 3
    kids = _get(api, "/api/jobs", source="seeded", parent=IDS["parent"])
    assert [row["name"] for row in kids["jobs"]] == ["rollout", "rollout", "trainer"]
    failed = _get(api, "/api/jobs", source="seeded", state="failed")
    assert set(_ids(failed)) == {IDS["failed"], IDS["gang"]}
    assert _ids(_get(api, "/api/jobs", prefix="tokenize")) == [IDS["flaky"]]


def test_a_job_detail_names_the_earliest_failed_attempt_and_task(api: TestClient) -> None:
    gang = _get(api, f"/api/jobs/{IDS['gang']}", source="seeded")
    assert [a["kind"] for a in gang["attempts"]] == ["preempted", "failed"]
    cause = gang["root_cause"]
    assert (cause["attempt"], cause["exit_code"], cause["recovered"]) == (2, 1, False)
    assert cause["task"].startswith("slice 1 (tpu-v4-32-b7), host 2: jax.errors")
    assert gang["gang"]["first_failed_slice"] == 1
    assert [a["megascale"]["MEGASCALE_COORDINATOR_ADDRESS"] for a in gang["gang"]["attempts"]] == [
        "10.0.0.11",
        "10.0.0.12",
    ]
    flaky = _get(api, f"/api/jobs/{IDS['flaky']}")["root_cause"]
    assert (flaky["attempt"], flaky["recovered"]) == (1, True)
    assert flaky["error"].startswith("OSError: [Errno 5]")
    assert _get(api, f"/api/jobs/{IDS['preempted']}")["root_cause"] is None
    parent = _get(api, f"/api/jobs/{IDS['parent']}")
    assert parent["children"]["total"] == 3
    (group,) = parent["groups"]
    assert (group["size"], group["ready"], group["dead"], group["restarts"]) == (4, 3, 1, 2)
    missing = api.get("/api/jobs/no-such-job")
    assert missing.status_code == 404 and "no job 'no-such-job'" in missing.json()["error"]


def test_real_local_jobs_their_attempts_children_and_logs(api: TestClient) -> None:
    rows = {row["name"]: row for row in _get(api, "/api/jobs", source="local")["jobs"]}
    assert set(rows) == {"ok", "bad", "parent"}  # top-level only
    assert rows["parent"]["children"] == 3 and rows["bad"]["failures"] == 1
    bad = _get(api, f"/api/jobs/{rows['bad']['id']}", source="local")
    assert [(a["attempt"], a["kind"]) for a in bad["attempts"]] == [(1, "failed")]
    assert bad["root_cause"]["error"].startswith("ValueError: bad shard")
    parent = _get(api, f"/api/jobs/{rows['parent']['id']}", source="local")
    kid = parent["children"]["rows"][0]["id"]
    assert kid.startswith(rows["parent"]["id"] + "/kid-")  # an id with a slash
    assert _get(api, f"/api/jobs/{kid}/logs")["lines"] == ["[0] step 1 done"]
    assert _get(api, f"/api/jobs/{kid}")["job"]["parent"] == rows["parent"]["id"]


def test_secrets_never_reach_an_answer(api: TestClient) -> None:
    bad = next(r for r in _get(api, "/api/jobs", source="local")["jobs"] if r["name"] == "bad")
    answers = [
        api.get("/api/jobs", params={"source": "local"}),
        api.get(f"/api/jobs/{bad['id']}"),
        api.get(f"/api/jobs/{bad['id']}/logs"),
    ]
    for response in answers:
        assert response.status_code == 200
        assert SECRET not in response.text
    assert _get(api, f"/api/jobs/{bad['id']}/logs")["lines"] == ["token is ***"]


def test_a_live_actor_group_with_a_dead_member(local: LocalClient) -> None:
    group = local.create_actor_group(_Member, name="members", count=4)
    with pytest.raises(ActorError):
        group.wait_ready()  # every member: one can never be ready
    group.wait_ready(count=3, timeout=60)
    dashboard = Dashboard([ClientSource(local, groups=[group])])
    try:
        (row,) = dashboard.groups({})["groups"]
        assert (row["size"], row["ready"], row["dead"]) == (4, 3, 1)
        (dead,) = [m for m in row["members"] if m["state"] == "dead"]
        assert dead["name"] == "members-2" and "index 2 cannot start" in dead["error"]
    finally:
        dashboard.close()
        group.shutdown()


def test_a_clients_own_groups_show_without_being_named() -> None:
    with LocalClient(echo_logs=False) as client:
        group = client.create_actor_group(_Member, name="own", count=2)
        group.wait_ready(timeout=60)
        dashboard = Dashboard([ClientSource(client)])
        try:
            (row,) = dashboard.groups({})["groups"]
            assert (row["name"], row["size"], row["ready"]) == ("own", 2, 2)
        finally:
            dashboard.close()


class _Member:
    def __init__(self) -> None:
        if fray.current_actor().index == 2:
            raise RuntimeError("index 2 cannot start")


def test_recorded_local_runs_show_after_their_client_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRAY_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("API_TOKEN", SECRET)
    with fray.backend.client_from_spec("local?record=1") as client:
        handles = [client.submit(_request(n, f)) for n, f in (("ok", _ok), ("bad", _fail))]
        fray.wait_all(handles, raise_on_failure=False, timeout=60)
    monkeypatch.delenv("API_TOKEN")  # the reader's process holds no secret to mask
    dashboard = Dashboard([RunStoreSource()])
    try:
        rows = {row["name"]: row for row in dashboard.jobs({})["jobs"]}
        assert (rows["ok"]["state"], rows["bad"]["state"]) == ("succeeded", "failed")
        bad = dashboard.job(rows["bad"]["id"], {})
        assert [a["kind"] for a in bad["attempts"]] == ["failed"]
        assert SECRET not in json.dumps(bad)
        assert dashboard.logs(rows["bad"]["id"], {})["lines"] == ["token is ***"]
        assert dashboard.logs(rows["ok"]["id"], {})["lines"] == ["[0] step 1 done"]
    finally:
        dashboard.close()


def test_record_takes_a_bool() -> None:
    with pytest.raises(fray.InvalidRequestError, match="LocalClient.record: 'yes'"):
        LocalClient(record="yes")  # type: ignore[arg-type]
    with pytest.raises(fray.InvalidRequestError, match=r"record: '2' is not valid; 0 or 1"):
        fray.backend.client_from_spec("local?record=2")


def test_serve_runs_the_page_for_a_live_client_in_a_thread(local: LocalClient) -> None:
    with serve(local) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url) as page:
            html = page.read().decode()
            assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert '<script src="/static/app.js">' in html
        with urllib.request.urlopen(server.url + "api/jobs") as answer:
            assert {row["name"] for row in json.load(answer)["jobs"]} == {"ok", "bad", "parent"}
        rebound = urllib.request.Request(server.url + "api/jobs", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError, match="400"):
            urllib.request.urlopen(rebound)


def test_the_page_loads_nothing_from_elsewhere() -> None:
    static = Path(fray.dashboard.__file__).parent / "static"
    for path in static.iterdir():
        text = path.read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path


def test_importing_the_dashboard_imports_no_web_server() -> None:
    code = (
        "import sys, fray.dashboard\n"
        "print([m for m in ('starlette', 'uvicorn') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_fray_dashboard_serves_the_recorded_runs_until_stopped(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    done = subprocess.run(
        [*FRAY, "run", "--name", "hello", "--", "echo", "hi"], env=env, check=False
    )
    assert done.returncode == 0
    pipe = subprocess.PIPE
    args = [*FRAY, "dashboard", "--port", "0"]
    proc = subprocess.Popen(args, stdout=pipe, stderr=pipe, text=True, env=env)
    try:
        line = read_line(proc)
        assert line.startswith("fray dashboard: http://127.0.0.1:") and "(backends: local)" in line
        url = line.split()[2]
        with urllib.request.urlopen(url + "api/jobs") as answer:
            (row,) = json.load(answer)["jobs"]
        assert (row["name"], row["state"], row["source"]) == ("hello", "succeeded", "local")
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)


def test_fray_dashboard_reports_a_bad_spec_and_a_taken_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["dashboard", "--spec", "nope"]) == 2
    assert "--spec: 'nope' is not valid; unknown backend" in capsys.readouterr().err
    with serve(LocalClient(echo_logs=False)) as server:
        port = server.url.rsplit(":", 1)[1].strip("/")
        assert main(["dashboard", "--port", port]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "hint: --port 0 picks a free port" in err


class _Counting:
    """A client that counts its listings."""

    scheme = "counting"

    def __init__(self, client: LocalClient) -> None:
        self.client, self.listings = client, 0

    def list_jobs(self) -> list[JobInfo]:
        self.listings += 1
        return self.client.list_jobs()

    def get_job(self, job_id: str) -> Any:
        return self.client.get_job(job_id)


@pytest.mark.parametrize(("max_age", "listings"), [(60.0, 1), (0.0, 3)])
def test_a_page_refresh_lists_a_live_client_once(
    local: LocalClient, max_age: float, listings: int
) -> None:
    counting = _Counting(local)
    dashboard = Dashboard([ClientSource(counting, max_age=max_age)])
    try:
        (parent,) = [r for r in dashboard.jobs({})["jobs"] if r["name"] == "parent"]
        assert dashboard.jobs({"parent": parent["id"]})["total"] == 3
        assert dashboard.job(parent["id"], {})["children"]["total"] == 3
    finally:
        dashboard.close()
    assert counting.listings == listings


def test_without_the_extra_the_error_is_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("FRAY_STATE_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if it were not installed
    assert main(["dashboard", "--port", "0"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "fray dashboard: error: the dashboard needs Starlette and uvicorn (uvicorn is missing): "
        'pip install "fray-core[dashboard]"'
    ]
