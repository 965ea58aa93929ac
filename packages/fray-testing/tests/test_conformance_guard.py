"""The guard: a backend may not drop or quietly override a standard conformance test."""

from __future__ import annotations

import pytest

from fray_testing.conformance import (
    ALL_TEST_CLASSES,
    BackendConformance,
    ConformanceTests,
    JobTests,
    PoolTests,
    capability_reasons,
    check_overrides,
)


def test_faithful_subclass_passes() -> None:
    class TestFaithful(JobTests):
        pass

    assert check_overrides(TestFaithful) == []


def test_dropped_test_is_reported() -> None:
    class TestDropping(JobTests):
        test_callable_job_succeeds = None  # pyright: ignore[reportAssignmentType]

    [problem] = check_overrides(TestDropping)
    assert "test_callable_job_succeeds is dropped" in problem


def test_override_without_xfail_is_reported() -> None:
    class TestOverriding(JobTests):
        def test_callable_job_succeeds(self) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
            pass

    [problem] = check_overrides(TestOverriding)
    assert "overrides a standard test" in problem


def test_skip_or_reasonless_xfail_is_reported() -> None:
    class TestSkipping(JobTests):
        @pytest.mark.skip(reason="flaky")
        def test_callable_job_succeeds(self) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
            pass

        @pytest.mark.xfail
        def test_wait_again_returns_same_status(self) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
            pass

    assert len(check_overrides(TestSkipping)) == 2


def test_xfail_with_reason_is_allowed() -> None:
    class TestKnownBug(JobTests):
        @pytest.mark.xfail(reason="backend bug #12: results lost on retry", strict=True)
        def test_callable_job_succeeds(self) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
            pass

    assert check_overrides(TestKnownBug) == []


def test_skipping_the_whole_class_is_reported() -> None:
    @pytest.mark.skip(reason="later")
    class TestSkipped(JobTests):
        pass

    assert any("marked skip" in p for p in check_overrides(TestSkipped))


def test_overriding_the_guard_itself_is_reported() -> None:
    class TestSilenced(JobTests):
        def test_conformance_guard_DO_NOT_OVERRIDE(self) -> None:
            pass

    assert check_overrides(TestSilenced)


def test_suite_has_enough_distinct_tests() -> None:
    names = {
        name
        for name in dir(BackendConformance)
        if name.startswith("test_") and name != "test_conformance_guard_DO_NOT_OVERRIDE"
    }
    assert len(names) >= 60


def test_every_capability_has_a_reason() -> None:
    reasons = capability_reasons()
    assert reasons
    assert all(len(reason) > 20 for reason in reasons.values())


def test_every_topic_is_in_the_whole_suite() -> None:
    topics = {
        base
        for base in BackendConformance.__mro__
        if base not in (BackendConformance, ConformanceTests)
        and isinstance(base, type)
        and issubclass(base, ConformanceTests)
    }
    assert topics == set(ALL_TEST_CLASSES)
    assert PoolTests in topics
