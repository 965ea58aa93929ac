"""Asking the GCE metadata server whether this VM is being preempted.

A spot or preemptible TPU VM learns of its preemption from
``computeMetadata/v1/instance/preempted``, which answers ``TRUE`` once the VM is being taken
away. When a host's program fails, that answer decides whether the attempt counts as a
preemption (retried against ``max_retries_preemption``) or as the program's own failure.

Off GCE there is no metadata server: every question answers ``False`` quickly, and after the
first connection failure this process stops asking (the server does not appear later).
"""

from __future__ import annotations

import logging
import os
import threading

from fray_tpu import environment_variables as ev

__all__ = ["DEFAULT_METADATA_HOST", "is_preempted", "metadata_base_url"]

logger = logging.getLogger(__name__)

DEFAULT_METADATA_HOST = "metadata.google.internal"
"""The metadata server's name on GCE."""

_unreachable: set[str] = set()
_lock = threading.Lock()


def metadata_base_url(host: str | None = None) -> str:
    """``http://<host>/computeMetadata/v1/``, with ``host`` from ``$GCE_METADATA_HOST``.

    Args:
        host: ``host[:port]`` or a full ``http://`` URL; ``None`` reads the env var and falls
            back to :data:`DEFAULT_METADATA_HOST`.
    """
    host = host or os.environ.get(ev.GCE_METADATA_HOST) or DEFAULT_METADATA_HOST
    if host.startswith(("http://", "https://")):
        base = host.rstrip("/")
        if not base.endswith("/computeMetadata/v1"):
            base += "/computeMetadata/v1"
        return base + "/"
    return f"http://{host}/computeMetadata/v1/"


def is_preempted(host: str | None = None, *, timeout: float = 2.0) -> bool:
    """Whether the metadata server says this VM is being preempted.

    Args:
        host: The metadata server, as in :func:`metadata_base_url`.
        timeout: Seconds to wait for an answer.

    Returns:
        ``True`` only when the server answers ``TRUE`` (any case); ``False`` when it says
        otherwise, answers with an error, or cannot be reached.
    """
    import urllib.error  # here: fray_tpu (and fray-ray, which reads Ray's errors through it)
    import urllib.request  # stays cheap to import

    base = metadata_base_url(host)
    with _lock:
        if base in _unreachable:
            return False
    request = urllib.request.Request(
        base + "instance/preempted", headers={"Metadata-Flavor": "Google"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(64).decode("ascii", errors="replace")
    except urllib.error.HTTPError as err:
        err.close()
        logger.warning("metadata server %s answered %s to instance/preempted", base, err.code)
        return False
    except (urllib.error.URLError, OSError) as err:
        # No server (not on GCE): remember, so that health checks stay cheap.
        logger.debug("metadata server %s unreachable: %s", base, err)
        with _lock:
            _unreachable.add(base)
        return False
    return body.strip().lower() == "true"
