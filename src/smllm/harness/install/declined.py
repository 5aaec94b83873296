"""Declined parts: `[harness.NAME] without = [PART…]` in the scope's config
(`.smllm/config.toml` at the project root, or the user config), edited in place with tomlkit
(cli-and-harnesses.md §6, "Declining"). The config loader already reads and checks this table
(machine/configs/config.py, CFG-11)."""

from __future__ import annotations

import os

import tomlkit

from ...machine.configs.config import user_config_path
from .jsonfile import Broken
from .tomlfile import dump_toml, parse_toml

__all__ = ["config_path", "declined", "with_declined"]


def config_path(scope: str, root: str) -> str:
    if scope == "user":
        return user_config_path()
    return os.path.join(root, ".smllm", "config.toml")


def declined(text: str | None, name: str) -> list[str]:
    """The parts of `name` the config declines; Broken when it isn't TOML or the list isn't a
    list of strings."""
    doc = parse_toml(text)
    table = doc.get("harness", {})
    entry = table.get(name, {}) if isinstance(table, dict) else None
    parts = entry.get("without", []) if isinstance(entry, dict) else None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise Broken(f"harness.{name}.without must be a list of part names")
    return [str(p) for p in parts]


def with_declined(text: str | None, name: str, parts: list[str]) -> str:
    """The config's text with `[harness.NAME] without` = `parts`: items added at the end or
    removed where they stand; an emptied list goes, then an emptied table."""
    doc = parse_toml(text)
    harness = doc.get("harness")
    if harness is None:
        if not parts:
            return text or ""
        harness = tomlkit.table(is_super_table=True)
        doc["harness"] = harness
    entry = harness.get(name)
    if entry is None:
        if not parts:
            return text or ""
        entry = tomlkit.table()
        harness[name] = entry
    items = entry.get("without")
    if items is None:
        items = tomlkit.array()
        entry["without"] = items
    for i in range(len(items) - 1, -1, -1):
        if items[i] not in parts:
            del items[i]
    for part in parts:
        if part not in items:
            items.append(part)
    gone = False
    if not parts:
        del entry["without"]
        if not entry:
            del harness[name]
            gone = True
        if not harness:
            del doc["harness"]
    out = dump_toml(doc, text)
    if gone and out.strip():  # the blank line tomlkit put before the table goes with it
        out = out.rstrip("\n") + "\n"
    return out.lstrip("\n") if text is None or not text.strip() else out
