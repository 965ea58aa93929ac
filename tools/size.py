"""How big each of Fray's packages is: syntax-tree nodes, lines and the share of docstrings.

    python tools/size.py                 # a table, one row per package
    python tools/size.py --json          # the same as JSON
    python tools/size.py --check         # exit 1 if a package is over its limit or under 12 %
    python tools/size.py --since 2f0ec05 # each commit's change in nodes since then, per package

Size is counted in syntax-tree nodes (``ast.walk`` over every ``.py`` file under
``packages/<package>/src``), because packing more code into fewer lines does not change it.
Lines are physical lines; the docstring share is the lines that docstrings (of modules,
classes and functions) span, over all lines. ``fray-core`` is counted without
``fray/migrate``, as its ceiling is.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

#: Node counts at 2f0ec05: the ceilings of the code that existed then (DESIGN.md).
CEILINGS = {
    "fray-core": 48_970,
    "fray-ray": 15_148,
    "fray-iris": 14_270,
    "fray-tpu": 9_415,
    "fray-testing": 23_946,
}
#: Code added since by features of their own, outside those ceilings (their own budget).
NEW_FEATURES = {
    "fray-core": ("fray/_pool.py", "fray/_pool_", "fray/dashboard/", "fray/cli/_dashboard.py"),
    "fray-testing": ("fray_testing/conformance/pools.py", "fray_testing/conformance/_pool"),
}
#: Nodes that features of other issues added inside modules that existed at 2f0ec05 (issue 45:
#: "features added by other issues bring their own"): each entry is the issue, what it added,
#: the commits (``--since 2f0ec05`` prints every commit's change) or, where one commit mixed a
#: feature with other work, the functions and classes that are the feature, and its nodes.
#: Code moved between packages moves its nodes (negative: what left). A package's limit is
#: its ceiling plus its allowances.
ALLOWANCES: dict[str, tuple[tuple[str, str, int], ...]] = {
    "fray-core": (
        ("issue 42: the bulk-wait hook BaseClient._await", "1c22b4f d972141 8608fb6", 573),
        ("issue 43: capability notes (disk on Ray)", "8451568", 220),
        ("issue 44: a finished job's older lines spill to a file", "776f7f7", 270),
        ("issue 46: pools on the client and group protocols", "00e03c1 0b77c28", 161),
        (
            "issue 47: attempt history, kept JobInfo, a client's groups",
            "ec402d2 7827a38 a961d46",
            879,
        ),
    ),
    "fray-ray": (
        (
            "issue 42: moved in from fray-tpu",
            "errors.py, _convert.runtime_env/environment_runtime_env",
            505,
        ),
        (
            "issue 42: the bulk wait and the watcher",
            "await_ends, _harvest, Watcher, CallableJob.watch/_from_future, RayClient._await",
            1_107,
        ),
        ("issue 42: sys.exit as a failure; fray-tpu as an entry point", "JobExit, _gangs", 124),
        ("issue 43: disk reserved where nodes advertise it", "RayClient._reserves_disk", 115),
        ("issue 44: the command-job cap", "CommandSlots", 120),
        (
            "issue 44: a bulk wait's slice grows with its refs; refs of an attempt another "
            "thread decided are not read again",
            "await_ends, _settle",
            74,
        ),
    ),
    "fray-iris": (
        (
            "issue 44: jobs submitted together watched in one round; a submitted job drops "
            "its entrypoint",
            "5ec38ba",
            161,
        ),
        (
            "issue 44: Iris is asked the states of at most 1,000 jobs a call",
            "9fc8536: the 0.2.20 adapter's states() and STATES_PER_CALL (33 -> 91 nodes)",
            58,
        ),
        (
            "issue 44: a look at an actor group reads the results store only for members "
            "that served or ended (not every member's record each poll)",
            "9fc8536: the guard in IrisActorGroup._end",
            18,
        ),
        (
            "issue 44: logs() returns every line, read page by page past Iris's 1,000",
            "21e803b",
            31,
        ),
    ),
    "fray-tpu": (("issue 42: moved out to fray-ray", "ray/errors.py, ray/runtime_env.py", -505),),
}
MIN_DOCSTRING_SHARE = 0.12


def limit(package: str) -> int:
    """A package's node limit: its ceiling at 2f0ec05 plus what other issues brought."""
    return CEILINGS[package] + sum(nodes for _, _, nodes in ALLOWANCES.get(package, ()))


class Size(NamedTuple):
    """One package's size."""

    nodes: int
    lines: int
    docstring_lines: int
    new_feature_nodes: int

    @property
    def docstring_share(self) -> float:
        """Docstring lines over all lines."""
        return self.docstring_lines / self.lines if self.lines else 0.0


def _docstring_lines(tree: ast.Module) -> int:
    """The lines the docstrings of a module, its classes and functions span."""
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                total += (first.end_lineno or first.lineno) - first.lineno + 1
    return total


def measure(package: str, rev: str | None = None) -> Size:
    """The size of ``packages/<package>/src`` (fray-core without ``fray/migrate``), in the
    working tree or, with ``rev``, at that git revision."""
    prefix = f"packages/{package}/src/"
    if rev is None:
        src = ROOT / prefix
        files = {p.relative_to(src).as_posix(): p.read_text() for p in src.rglob("*.py")}
    else:
        listed = _git("ls-tree", "-r", "--name-only", rev, prefix).split()
        files = {f.removeprefix(prefix): _git("show", f"{rev}:{f}") for f in listed}
    nodes = lines = docs = new = 0
    for relative, text in sorted(files.items()):
        if not relative.endswith(".py") or (
            package == "fray-core" and relative.startswith("fray/migrate/")
        ):
            continue
        tree = ast.parse(text)
        count = sum(1 for _ in ast.walk(tree))
        if relative.startswith(NEW_FEATURES.get(package, ())):
            new += count
        else:
            nodes += count
        lines += len(text.splitlines())
        docs += _docstring_lines(tree)
    return Size(nodes, lines, docs, new)


def _git(*args: str) -> str:
    """What a git command prints, run in the checkout."""
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def history(package: str, since: str) -> None:
    """Prints how each commit since ``since`` changed the package's nodes (outside the new
    features), oldest first: what the allowances above are read from."""
    before = measure(package, since).nodes
    print(f"{package}: {before:,} nodes at {since}")
    for rev in _git(
        "rev-list", "--reverse", f"{since}..HEAD", "--", f"packages/{package}/src"
    ).split():
        after = measure(package, rev).nodes
        print(f"{after - before:+7,} {rev[:7]} {_git('log', '-1', '--format=%s', rev)[:90]}")
        before = after


def problems(sizes: dict[str, Size]) -> list[str]:
    """What breaks a ceiling or the docstring floor, in words."""
    found: list[str] = []
    for package, size in sizes.items():
        if size.nodes > limit(package):
            found.append(f"{package}: {size.nodes:,} nodes, over its limit of {limit(package):,}")
        if size.docstring_share < MIN_DOCSTRING_SHARE:
            found.append(
                f"{package}: docstrings are {size.docstring_share:.1%} of its lines, "
                f"under {MIN_DOCSTRING_SHARE:.0%}"
            )
    return found


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 on a ceiling or floor")
    parser.add_argument("--since", metavar="REV", help="each commit's change since REV")
    args = parser.parse_args(argv)
    if args.since:
        for package in CEILINGS:
            history(package, args.since)
        return 0
    sizes = {package: measure(package) for package in CEILINGS}
    if args.json:
        rows = {p: {**s._asdict(), "docstring_share": s.docstring_share} for p, s in sizes.items()}
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{'package':<14}{'nodes':>9}{'ceiling':>9}{'limit':>9}{'new':>8}{'lines':>8}{'docs':>7}"
        )
        for package, size in sizes.items():
            print(
                f"{package:<14}{size.nodes:>9,}{CEILINGS[package]:>9,}{limit(package):>9,}"
                f"{size.new_feature_nodes:>8,}{size.lines:>8,}{size.docstring_share:>7.1%}"
            )
    found = problems(sizes)
    for problem in found:
        print(f"size: {problem}", file=sys.stderr)
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
