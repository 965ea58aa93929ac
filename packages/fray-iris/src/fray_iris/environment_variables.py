"""Environment variables fray-iris reads or sets. All start with ``FRAY_``."""

FRAY_IRIS_RESULTS_URL = "FRAY_IRIS_RESULTS_URL"
"""Where tasks store callables' return values and errors (an fsspec URL every task and the
driver can reach, e.g. ``gs://bucket/fray-results``). Unset: a private folder under the
system temp dir, which only works when the cluster runs on this machine. Set inside every
task of a Fray job, so nested jobs use the same place."""
