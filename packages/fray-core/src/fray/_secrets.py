"""Telling secrets apart: env var names that look like they hold one, and values an error
message or a listing may show with those hidden. No import of Fray's: ``fray.errors`` uses it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

_SECRET_RE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# A name starts where no name character precedes it: without the lookbehind, a long name
# with no "=" after it is scanned again from each of its characters (quadratic time).
_ASSIGNMENT_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)=")
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    """Whether an env var name looks like it holds a secret (its value is then redacted)."""
    return bool(_SECRET_RE.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Returns a copy of ``env`` with the values of secret-looking names replaced by ``***``."""
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


def redacted(value: Any) -> Any:
    """``value`` as an error message may show it: what is named like a secret keeps its name
    and loses its value, at any depth and in every shape a wrong ``env_vars`` takes (a
    mapping, ``(name, value)`` pairs, ``"NAME=value"`` text)."""
    if isinstance(value, Mapping):
        return {
            redacted(key): REDACTED if isinstance(key, str) and is_secret_name(key) else redacted(v)
            for key, v in cast(Mapping[Any, Any], value).items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        items = [redacted(item) for item in cast(Iterable[Any], value)]
        if any(isinstance(item, str) and is_secret_name(item) for item in items):
            items = [i if isinstance(i, str) and is_secret_name(i) else REDACTED for i in items]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, str):
        for match in _ASSIGNMENT_RE.finditer(value):
            if is_secret_name(match[1]) and not value.startswith(REDACTED, match.end()):
                return value[: match.end()] + REDACTED
    return value


def masker(envs: Iterable[Mapping[str, str]]) -> Callable[[str], str]:
    """A function that masks, in a text, the values of the secret-looking env vars of ``envs``
    (those of four characters or more: masking ``1`` everywhere would protect nothing)."""
    secrets = {v for env in envs for k, v in env.items() if is_secret_name(k) and len(v) >= 4}
    ordered = sorted(secrets, key=len, reverse=True)

    def mask(text: str) -> str:
        for value in ordered:
            text = text.replace(value, REDACTED)
        return text

    return mask
