"""The dashboard page in a real headless Chromium (Debian's ``chromium``, driven by Playwright's
Python wheel; its own browser download is never used): the seeded scenario beside real local
jobs, clicked through as a user would.

Without Chromium (or Playwright) these tests skip, saying why; with ``FRAY_REQUIRE_BROWSER=1``
(set by ``.ci/run``, which installs Chromium) they fail instead. A screenshot of each page is
written to ``FRAY_SCREENSHOTS`` (a folder; default: the test's temporary folder).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fray
from fray import Entrypoint, JobRequest, LocalClient
from fray.dashboard import ClientSource, Dashboard, DashboardServer
from test_dashboard_api import Broken
from test_dashboard_seed import FAILED_ERROR, IDS, scenario_source

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_JUNK = re.compile(r"\bundefined\b|\bNaN\b|\[object Object\]")


def _chromium() -> str:
    """Debian's Chromium, or a skip (a failure under ``FRAY_REQUIRE_BROWSER=1``) saying why."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    why = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        why = "Playwright is not installed (fray-core's test group has it)"
    if why is None and not os.access(path, os.X_OK):
        why = "Chromium is not installed (apt-get install chromium; .ci/run does)"
    if why is not None:
        if os.environ.get("FRAY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"FRAY_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = _chromium()
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=path,
            args=_FLAGS,
            viewport={"width": 1440, "height": 900},
        )
        yield context
        context.close()


def _ok() -> str:
    print("loaded 128 shards")
    return "ok"


@pytest.fixture(scope="module")
def server() -> Iterator[DashboardServer]:
    """The seeded scenario and a live LocalClient with two real jobs, one failed."""
    client = LocalClient(echo_logs=False)
    jobs = [
        client.submit(JobRequest(name="local-prep", entrypoint=Entrypoint.from_callable(_ok))),
        client.submit(JobRequest(name="local-check", entrypoint=Entrypoint.from_command("false"))),
    ]
    fray.wait_all(jobs, raise_on_failure=False, timeout=60)
    dashboard = Dashboard([scenario_source("seeded"), ClientSource(client)])
    with DashboardServer(dashboard) as running:
        yield running
    client.shutdown()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    page.set_default_timeout(20_000)
    yield page
    page.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("FRAY_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


def expect(locator: Any) -> Any:
    """Playwright's auto-waiting assertions (no script evaluated in the page: its CSP
    forbids eval)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def _open(page: Any, url: str, ready: str) -> None:
    page.goto(url)
    page.wait_for_selector(ready)


def _no_junk(page: Any) -> None:
    text = page.inner_text("body")
    assert not _JUNK.search(text), _JUNK.search(text)


def _row(page: Any, job_id: str) -> Any:
    return page.locator(f'#jobs tr[data-job="{job_id}"]')


def test_the_failure_reason_is_reached_in_two_clicks(page: Any, server: DashboardServer) -> None:
    _open(page, server.url, "#jobs")
    row = _row(page, IDS["failed"])
    assert row.locator("td.reason").inner_text() == FAILED_ERROR  # on the first page already
    row.locator("td.name a").click()  # click 1
    cause = page.locator("#root-cause")
    cause.wait_for()
    assert "Attempt 1 failed first (exit code 1)" in cause.inner_text()
    assert FAILED_ERROR in cause.inner_text()
    page.locator("nav a[data-tab=jobs]").click()
    _row(page, IDS["gang"]).locator("td.name a").click()  # a gang: its first failed task
    page.locator("#root-cause").wait_for()
    assert "First failed task: slice 1 (tpu-v4-32-b7), host 2" in page.inner_text("#root-cause")


def test_failures_and_preemptions_read_1_and_3_on_their_rows(
    page: Any, server: DashboardServer
) -> None:
    _open(page, server.url, "#jobs")
    preempted, flaky = _row(page, IDS["preempted"]), _row(page, IDS["flaky"])
    assert preempted.locator("td.preemptions").inner_text() == "3"
    assert preempted.locator("td.failures").inner_text() == "0"
    assert flaky.locator("td.failures").inner_text() == "1"
    assert flaky.locator("td.preemptions").inner_text() == "0"
    assert _row(page, IDS["pending"]).locator("td.reason").inner_text().startswith("no v5litepod")
    _no_junk(page)


def test_expanded_children_survive_a_refresh(
    page: Any, server: DashboardServer, shots: Path
) -> None:
    _open(page, server.url, "#jobs")
    _row(page, IDS["parent"]).locator("button.toggle").click()
    children = page.locator("#jobs tr.child")
    children.nth(2).wait_for()
    assert children.count() == 3
    page.evaluate("renderJobs()")  # what the next poll does
    expect(children).to_have_count(3)
    assert (
        _row(page, IDS["parent"]).locator("button.toggle").get_attribute("aria-expanded") == "true"
    )
    _no_junk(page)
    page.screenshot(path=str(shots / "dashboard-jobs.png"), full_page=True)


def test_filters_by_backend_state_and_prefix(page: Any, server: DashboardServer) -> None:
    _open(page, server.url, "#jobs")
    rows = page.locator("#jobs tbody tr")
    page.select_option("#f-source", "local")
    expect(rows).to_have_count(2)
    page.select_option("#f-state", "failed")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("local-check")
    page.select_option("#f-source", "")
    page.fill("#f-prefix", "multislice")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("multislice-v4-32")


def test_a_job_page_shows_attempts_logs_children_groups_and_gang(
    page: Any, server: DashboardServer, shots: Path
) -> None:
    _open(page, f"{server.url}#/job/seeded/{IDS['preempted']}", "#attempts")
    kinds = page.locator("#attempts tbody tr td:nth-child(2)").all_inner_texts()
    assert kinds == ["preempted", "preempted", "preempted", "succeeded"]
    assert page.locator("#root-cause").count() == 0  # preemptions are not failures
    _open(page, f"{server.url}#/job/seeded/{IDS['parent']}", "#groups")
    assert page.locator("#children tr").count() == 3
    _open(page, f"{server.url}#/job/seeded/{IDS['gang']}", ".gang")
    logs = page.locator("#logs")
    assert "[6] jax.errors.JaxRuntimeError" in logs.inner_text()
    page.fill("#log-filter", "torn down")
    expect(logs).to_have_text("[0] gang torn down\n")
    page.fill("#log-filter", "")
    _no_junk(page)
    page.screenshot(path=str(shots / "dashboard-job.png"), full_page=True)


def test_polling_stops_once_a_job_has_ended(page: Any, server: DashboardServer) -> None:
    _open(page, f"{server.url}#/job/seeded/{IDS['running']}", "#logs")
    expect(page.locator("#updated")).to_contain_text("refreshing every 3s")
    assert page.evaluate("ui.timer") is not None
    _open(page, f"{server.url}#/job/seeded/{IDS['succeeded']}", "#logs")
    expect(page.locator("#updated")).to_contain_text("job succeeded: not refreshed")
    assert page.evaluate("ui.timer") is None


def test_actor_groups_and_gangs_pages(page: Any, server: DashboardServer, shots: Path) -> None:
    _open(page, f"{server.url}#/actors", "#groups")
    row = page.locator('#groups tr[data-group="rollout-workers"]')
    assert row.locator("td.dead").inner_text() == "1"
    assert "rollout-workers-2: ActorDiedError: node 10.0.3.7 lost" in row.inner_text()
    _no_junk(page)
    page.screenshot(path=str(shots / "dashboard-actors.png"), full_page=True)
    _open(page, f"{server.url}#/gangs", ".gang")
    gang = page.locator(".gang")
    assert "Slice 1 failed first." in gang.inner_text()
    assert gang.locator(".slice[data-slice='1'] .host.first").inner_text() == "h2"
    assert gang.locator("table.megascale tbody tr").count() == 2
    _no_junk(page)
    page.screenshot(path=str(shots / "dashboard-gangs.png"), full_page=True)


def test_every_seeded_job_page_is_free_of_junk(page: Any, server: DashboardServer) -> None:
    for job_id in IDS.values():
        _open(page, f"{server.url}#/job/seeded/{job_id}", "#logs")
        _no_junk(page)


def test_an_unreachable_backend_is_a_banner_and_the_rest_renders(browser: Any) -> None:
    dashboard = Dashboard([scenario_source("seeded"), Broken()])
    page = browser.new_page()
    try:
        with DashboardServer(dashboard) as running:
            _open(page, running.url, "#jobs")
            banner = page.locator(".banner")
            assert banner.inner_text().startswith("Source broken is unreachable: ConnectionError")
            assert _row(page, IDS["failed"]).count() == 1
    finally:
        page.close()
