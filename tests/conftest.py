"""Shared pytest options: ``--update-golden`` rewrites the golden files from the current output
instead of comparing against them (STYLE.md rule 14): ``pytest --update-golden``, then review
the diff."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/* and docs/schema/* from the current output",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[Path, str], None]:
    """``golden(path, text)``: compare ``text`` with the golden file (or rewrite it under
    ``--update-golden``)."""
    update = bool(request.config.getoption("--update-golden"))

    def check(path: Path, text: str) -> None:
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"{path} is missing: run pytest --update-golden"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"{path} differs: run pytest --update-golden and review the diff"

    return check
