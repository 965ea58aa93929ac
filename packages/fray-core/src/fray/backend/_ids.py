"""Job ids: ``parent/child``, each part made from a job's name.

``/`` separates a parent job's id from its children's, so a name that contains ``/`` (Marin
names jobs after steps and output paths: ``tokenize:documents/fineweb``, ``gs://...``) is
escaped in its id: ``%`` becomes ``%25`` and ``/`` becomes ``%2F``. Nothing else changes,
and :func:`name_of_id_part` undoes it exactly.
"""

from __future__ import annotations

__all__ = ["job_id_part", "name_of_id_part"]


def job_id_part(name: str) -> str:
    """``name`` as one part of a job id (``%`` → ``%25``, ``/`` → ``%2F``)."""
    if "%" in name:
        name = name.replace("%", "%25")
    if "/" in name:
        name = name.replace("/", "%2F")
    return name


def name_of_id_part(part: str) -> str:
    """The name a :func:`job_id_part` was made from."""
    if "%" not in part:
        return part
    return part.replace("%2F", "/").replace("%25", "%")
