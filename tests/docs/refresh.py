"""For writers: run a page's examples and write what they print now into its console blocks.

    python -m tests.docs.refresh docs/PAGE.md [...]

Read the diff (`git diff docs/`) before keeping it: it is the docs test's diff, applied. The
shown ids, folders and times of a block stay as they were where the run pairs them
(tests/docs/placeholders.py); a new block gets this run's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .examples import (
    SYBIL,
    Block,
    _setup,
    _teardown,
    check_machine,
    run_console,
    write_file,
)


def refresh(page: Path) -> int:
    """Rewrite PAGE's console outputs; the number of blocks changed."""
    text = page.read_text()
    document = SYBIL.parse(page)
    _setup(document.namespace)
    sandbox = document.namespace["sandbox"]
    changed = 0
    edits: list[tuple[int, int, str, str]] = []
    try:
        for example in document.examples():
            block: Block = example.parsed
            if block.language == "console":
                new = "".join(
                    f"$ {step.command}\n{actual}"
                    for step, actual in run_console(sandbox, block.source)
                )
                if new != block.source:
                    edits.append((example.region.start, example.region.end, block.source, new))
            elif block.title is not None and block.language != "text":
                problem = write_file(sandbox, block)
                if problem:
                    print(f"{page}: {block.title}: {problem}", file=sys.stderr)
            elif block.language == "yaml" and "\nstates:" in "\n" + block.source:
                problem = check_machine(sandbox, block)
                if problem:
                    print(f"{page}, line {example.line}: {problem}", file=sys.stderr)
    finally:
        _teardown(document.namespace)
    for start, end, old, new in reversed(edits):
        fence = text[start:end]
        text = text[:start] + fence.replace(old, new, 1) + text[end:]
        changed += 1
    page.write_text(text)
    return changed


def main(argv: list[str]) -> int:
    for name in argv:
        print(f"{name}: {refresh(Path(name))} block(s) rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
