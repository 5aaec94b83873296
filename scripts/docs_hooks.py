"""MkDocs hooks (mkdocs.yml `hooks:`): the site's Mermaid runtime from the pinned npm package
the tests install (tests/mermaid, `npm ci`), so a diagram renders without the network; where
that package isn't installed, Material loads Mermaid from its CDN as usual."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

MERMAID = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "mermaid"
    / "node_modules"
    / "mermaid"
    / "dist"
    / "mermaid.min.js"
)


def on_post_build(config: Any, **kwargs: Any) -> None:
    if MERMAID.is_file():
        target = Path(config["site_dir"]) / "javascripts" / "mermaid.min.js"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MERMAID, target)
