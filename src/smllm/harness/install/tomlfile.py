"""TOML files edited in place with tomlkit, comments and formatting kept: Codex's
`[mcp_servers.smllm]` (cli-and-harnesses.md §6) and the `[harness.NAME] without` list of a
smllm config (declined.py). A byte order mark, which tomlkit refuses, is kept aside and written
back."""

from __future__ import annotations

from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.toml_document import TOMLDocument

from .jsonfile import DERIVED, Broken, state_of

__all__ = [
    "dump_toml",
    "parse_toml",
    "table_drop",
    "table_put",
    "table_state",
]

_BOM = "\ufeff"


def parse_toml(text: str | None) -> TOMLDocument:
    try:
        return tomlkit.parse((text or "").removeprefix(_BOM))
    except TOMLKitError as exc:
        raise Broken(f"not TOML: {exc}") from None


def dump_toml(doc: TOMLDocument, like: str | None) -> str:
    return (_BOM if like and like.startswith(_BOM) else "") + tomlkit.dumps(doc)


def _parent(doc: TOMLDocument, path: tuple[str, ...], make: bool) -> Any:
    here: Any = doc
    for i, key in enumerate(path):
        nxt = here.get(key)
        if nxt is None:
            if not make:
                return None
            nxt = tomlkit.table(is_super_table=True)
            here[key] = nxt
        if not isinstance(nxt, dict):
            raise Broken(f"{'.'.join(path[: i + 1])} must be a table")
        here = nxt
    return here


def table_state(doc: TOMLDocument, path: tuple[str, ...], key: str, want: dict[str, Any]) -> str:
    parent = _parent(doc, path, False)
    if parent is None or key not in parent:
        return "missing"
    value = parent[key]
    plain = value.unwrap() if hasattr(value, "unwrap") else value
    return state_of(plain, want, DERIVED)


def table_put(doc: TOMLDocument, path: tuple[str, ...], key: str, want: dict[str, Any]) -> None:
    """`[PATH.KEY]` holding exactly `want`: an existing table is edited key by key, keeping its
    place and comments; a new one goes at the end."""
    parent = _parent(doc, path, True)
    table = parent.get(key)
    if isinstance(table, dict):
        for name in [name for name in table if name not in want]:
            del table[name]
        for name, value in want.items():
            if name not in table or table[name] != value:
                table[name] = value
        return
    new = tomlkit.table()
    for name, value in want.items():
        new[name] = value
    if key in parent:
        del parent[key]
    parent[key] = new


def table_drop(doc: TOMLDocument, path: tuple[str, ...], key: str) -> None:
    parent = _parent(doc, path, False)
    if parent is None or key not in parent:
        return
    del parent[key]
    if not parent and path:
        holder = _parent(doc, path[:-1], False)
        if holder is not None:
            del holder[path[-1]]
