"""Every page of docs/ runs: its console examples print what the page shows (placeholders
aside: tests/docs/placeholders.py), the files it writes are written, and every machine it shows
validates. tests/docs/examples.py says the forms; a page that drifts fails with a unified diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from .examples import DOCS, run_page

PAGES = sorted(p for p in DOCS.rglob("*.md"))


def test_there_are_pages() -> None:
    assert len(PAGES) >= 20, [p.name for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_examples(page: Path) -> None:
    failures = run_page(page)
    assert not failures, "\n\n".join(failures)
