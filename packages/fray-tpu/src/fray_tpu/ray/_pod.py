# pyright: standard
"""``run_on_pod`` and friends: run a function on every VM of a TPU pod and block for the
per-host results (the predecessor's call shapes, on :func:`launch_on_pod`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fray_tpu.ray._launch import launch_on_pod

__all__ = [
    "run_on_pod",
    "run_on_pod_multislice",
    "run_on_pod_multislice_resumable",
    "run_on_pod_resumable",
]


def run_on_pod(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    num_slices: int | Sequence[int] = 1,
    max_retries_preemption: int = 10000,
    max_retries_failure: int = 10,
    runtime_env: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[Any]:
    """Runs ``fn()`` on every VM of ``num_slices`` slices of ``tpu_type``; returns the
    per-host results, slice by slice, then by worker id.

    Args:
        fn: A callable, or a ``@ray.remote`` function (its ``runtime_env``, ``num_cpus``,
            ``memory`` and custom resources are used).
        tpu_type: A TPU type, e.g. ``"v5p-64"``.
        num_slices: Slices to run on; a list means "the largest of these that the cluster
            can give" (e.g. ``[2, 4]``).
        max_retries_preemption: Re-runs after preemptions (N retries = N+1 attempts).
        max_retries_failure: Re-runs after the function's own failures.
        runtime_env: Ray runtime env of the host tasks (``env_vars``, ``pip``, ...).
        **options: ``args``, ``kwargs``, ``num_cpus``, ``memory``, ``scheduling_timeout``,
            ``health_interval``, ``supervisor_options``, ``name`` (see ``launch_on_pod``).

    Raises:
        TpuJobFailedError: A budget ran out; the first problem is chained as ``__cause__``.
        TpuSchedulingError: The slices could not be gathered within the scheduling timeout.
    """
    handle = launch_on_pod(
        fn,
        tpu_type,
        num_slices=num_slices,
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        runtime_env=runtime_env,
        **options,
    )
    return handle.host_results()


def run_on_pod_resumable(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    max_retries_preemption: int = 1_000_000,
    max_retries_failure: int = 10,
    **options: Any,
) -> list[Any]:
    """:func:`run_on_pod` on one slice, retrying preemptions (almost) without limit."""
    return run_on_pod_multislice_resumable(
        fn,
        tpu_type,
        options.pop("num_slices", 1),
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        **options,
    )


def run_on_pod_multislice(
    fn: Callable[..., Any], tpu_type: str, num_slices: int | Sequence[int], **options: Any
) -> list[Any]:
    """:func:`run_on_pod` on ``num_slices`` slices with no retries (both budgets 0)."""
    options.setdefault("max_retries_preemption", 0)
    options.setdefault("max_retries_failure", 0)
    return run_on_pod(fn, tpu_type, num_slices=num_slices, **options)


def run_on_pod_multislice_resumable(
    fn: Callable[..., Any],
    tpu_type: str,
    num_slices: int | Sequence[int],
    *,
    max_retries_preemption: int = 1_000_000,
    max_retries_failure: int = 10,
    **options: Any,
) -> list[Any]:
    """:func:`run_on_pod` on ``num_slices`` slices, retrying preemptions (almost) forever."""
    return run_on_pod(
        fn,
        tpu_type,
        num_slices=num_slices,
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        **options,
    )
