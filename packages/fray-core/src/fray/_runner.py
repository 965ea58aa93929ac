"""Runs a pickled callable in a job process: ``python -m fray._runner PAYLOAD RESULT``.

The payload is ``cloudpickle.dumps((fn, args, kwargs))``; the result file receives the
attempt's :class:`fray.backend.Outcome`, and the process exits with its exit code.
"""

from __future__ import annotations

import os
import sys


def _write(path: str, outcome: object) -> None:
    import cloudpickle

    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(cloudpickle.dumps(outcome))
    os.replace(tmp, path)


def main() -> int:
    import cloudpickle

    from fray.backend import Outcome

    payload_path, result_path = sys.argv[1], sys.argv[2]
    with open(payload_path, "rb") as f:
        fn, args, kwargs = cloudpickle.loads(f.read())
    outcome = Outcome.of_call(fn, *args, **kwargs)
    if outcome.trace:
        sys.stderr.write(outcome.trace)
    try:
        _write(result_path, outcome)
    except Exception as exc:
        message = f"the job's return value could not be pickled: {type(exc).__name__}: {exc}"
        sys.stderr.write(message + "\n")
        outcome = Outcome.failed(RuntimeError(message))
        _write(result_path, outcome)
    return 0 if outcome.kind == "succeeded" else outcome.exit_code or 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
