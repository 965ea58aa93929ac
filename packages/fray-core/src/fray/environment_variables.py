"""Environment variables Fray reads or sets. All start with ``FRAY_``."""

FRAY_CLIENT_SPEC = "FRAY_CLIENT_SPEC"
"""Which backend ``current_client()`` builds: ``local``, ``local?threads=N``, ``ray``,
``ray?namespace=N``, ``ray://host:port``, ``iris://host:port[?ws=path]`` or ``fake``."""

FRAY_JOB_ID = "FRAY_JOB_ID"
"""Set inside a job process: the job's id. Jobs submitted from there become its children."""

FRAY_TASK_INDEX = "FRAY_TASK_INDEX"
"""Set inside a job process: this replica's index, from 0."""

FRAY_NUM_TASKS = "FRAY_NUM_TASKS"
"""Set inside a job process: the number of replicas of the job."""

FRAY_STATE_DIR = "FRAY_STATE_DIR"
"""Where the ``fray`` CLI records local runs (a path or an fsspec URL)."""

FRAY_TERMINATE_GRACE_S = "FRAY_TERMINATE_GRACE_S"
"""Seconds a terminated local process gets between SIGTERM and SIGKILL (default 5; a number
>= 0, read when a LocalClient is made)."""

FRAY_JOB_HISTORY = "FRAY_JOB_HISTORY"
"""How many finished jobs a client keeps for ``list_jobs()`` and ``get_job()`` (default
10000; unfinished jobs are always kept, and a handle keeps its own job). Read when the client
is created."""
