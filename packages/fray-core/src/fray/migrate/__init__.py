"""Find what a code base uses of Ray (and of the predecessor's Fray API) and how to port it.

    from fray.migrate import scan

    report = scan("src/")
    for finding in report.findings:          # sorted by migration priority, file, line
        print(finding.path, finding.line, finding.found, "->", finding.replacement)

The scan is static (Python ``ast``): nothing is imported or run. ``fray migrate scan PATH``
prints the same report, or JSON with ``--json``. The guide is ``docs/migrating-from-ray.md``.
"""

from fray.migrate._report import Finding, ScanError, ScanReport, iter_strategies
from fray.migrate._scanner import scan
from fray.migrate._strategies import STRATEGIES, Strategy

__all__ = [
    "STRATEGIES",
    "Finding",
    "ScanError",
    "ScanReport",
    "Strategy",
    "iter_strategies",
    "scan",
]
