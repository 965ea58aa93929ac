"""What a scan returns: findings, files that could not be scanned, and the whole report."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from fray.migrate._strategies import STRATEGIES, Strategy

__all__ = ["Finding", "ScanError", "ScanReport", "iter_strategies"]


@dataclasses.dataclass(frozen=True)
class Finding:
    """One use of Ray (or of the predecessor API) and its Fray replacement.

    Attributes:
        path: File, relative to the scanned root where possible.
        line: 1-based line.
        column: 0-based column.
        pattern: Stable pattern id, e.g. ``ray-remote-task``.
        found: What was found, in words (``@ray.remote function train``).
        replacement: The recommended Fray form.
        strategy: Key of the :class:`Strategy` it belongs to.
        priority: That strategy's priority.
        snippet: The source line, stripped and shortened.
    """

    path: str
    line: int
    column: int
    pattern: str
    found: str
    replacement: str
    strategy: str
    priority: int
    snippet: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ScanError:
    """A file that could not be scanned (syntax error, unreadable)."""

    path: str
    line: int | None
    message: str


@dataclasses.dataclass
class ScanReport:
    """Everything a scan found, findings sorted by priority, file and line."""

    paths: list[str]
    files_scanned: int = 0
    findings: list[Finding] = dataclasses.field(default_factory=list[Finding])
    errors: list[ScanError] = dataclasses.field(default_factory=list[ScanError])

    @property
    def files_with_findings(self) -> int:
        """Files with at least one finding."""
        return len({f.path for f in self.findings})

    def counts(self) -> dict[str, int]:
        """Findings per strategy key, every strategy included."""
        counts = {s.key: 0 for s in STRATEGIES}
        for finding in self.findings:
            counts[finding.strategy] += 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-friendly data (the ``--json`` output)."""
        counts = self.counts()
        return {
            "version": 1,
            "paths": self.paths,
            "files_scanned": self.files_scanned,
            "files_with_findings": self.files_with_findings,
            "strategies": [{**dataclasses.asdict(s), "count": counts[s.key]} for s in STRATEGIES],
            "findings": [f.as_dict() for f in self.findings],
            "errors": [dataclasses.asdict(e) for e in self.errors],
        }

    def as_text(self) -> str:
        """The report as ``fray migrate scan`` prints it."""
        unparsed = f"; {len(self.errors)} could not be parsed" if self.errors else ""
        out = [
            f"fray migrate scan: {len(self.findings)} usage(s) in {self.files_with_findings} "
            f"of {self.files_scanned} file(s){unparsed}"
        ]
        for strategy, findings in iter_strategies(self):
            if findings:
                out += ["", f"{strategy.priority}. {strategy.title} ({len(findings)})"]
                out.append(f"   {strategy.summary}")
            for f in findings:
                out += [f"   {f.path}:{f.line}:{f.column}: {f.found}", f"      -> {f.replacement}"]
        if self.findings:
            out += [
                "",
                "Guide: docs/migrating-from-ray.md (Ray) and docs/migrating-from-fray-v2.md.",
            ]
        return "\n".join(out) + "\n"


def iter_strategies(report: ScanReport) -> Iterable[tuple[Strategy, list[Finding]]]:
    """Each strategy with its findings, in priority order (empty ones included)."""
    for strategy in STRATEGIES:
        yield strategy, [f for f in report.findings if f.strategy == strategy.key]
