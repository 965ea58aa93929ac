"""The migration guides' Fray snippets run against the real API; the Ray ones at least parse."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fray_cli_support import cli_env, import_quietly

DOCS = Path(__file__).resolve().parents[3] / "docs"
GUIDES = ["migrating-from-ray.md", "migrating-from-fray-v2.md"]
BLOCK = re.compile(r"^```python (\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    for guide in GUIDES:
        text = (DOCS / guide).read_text()
        for match in BLOCK.finditer(text):
            if match.group(1) == kind:
                line = text[: match.start()].count("\n") + 1
                found.append((guide, line, match.group(2)))
    return found


def test_guides_have_snippets() -> None:
    assert len(blocks("fray")) >= 10
    assert len(blocks("ray")) >= 6


@pytest.mark.integration
@pytest.mark.parametrize(("guide", "line", "code"), blocks("fray"), ids=lambda v: str(v)[:30])
def test_fray_snippet_runs(tmp_path: Path, guide: str, line: int, code: str) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=cli_env(tmp_path),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{guide}:{line}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("kind", ["ray", "v2"])
def test_other_snippets_parse(kind: str) -> None:
    for guide, line, code in blocks(kind):
        try:
            ast.parse(code)
        except SyntaxError as err:  # pragma: no cover - the message is the point
            raise AssertionError(f"{guide}:{line}: {err}") from err


def test_the_guide_names_every_scanner_strategy() -> None:
    STRATEGIES = import_quietly("fray.migrate").STRATEGIES

    text = (DOCS / "migrating-from-ray.md").read_text()
    for strategy in STRATEGIES[:4]:
        assert f"{strategy.priority}. **{strategy.title}**" in text, strategy.title
    v2 = (DOCS / "migrating-from-fray-v2.md").read_text()
    assert "Port the predecessor's Fray API" in v2
