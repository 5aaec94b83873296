"""A param's schema as the agent reads it in the events list: each `$ref` into the params'
`$defs` replaced by what it names, so the list never shows a reference the agent can't follow
(issue 20 §8). A reference met again while it is being inlined (a recursive schema: a tree, a
nested list) can't be inlined: it stays, and the `$defs` go with the schema (EVT-13, info)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["inline_refs", "resolve_ref"]

#: keywords whose values are data, never schemas: a `$ref` key inside them is data too
_DATA = frozenset({"enum", "const", "default", "examples"})
_PREFIX = "#/$defs/"


def resolve_ref(params: dict[str, Any], ref: str) -> tuple[tuple[str | int, ...], Any] | None:
    """(where, schema) of the schema `#/$defs/…` names inside `params`, or None: the JSON
    Pointer's parts unescaped, a list's index as a number."""
    where: list[str | int] = []
    node: Any = params
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            where.append(part)
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            where.append(int(part))
            node = node[int(part)]
        else:
            return None
    return tuple(where), node


def inline_refs(schema: Any, params: dict[str, Any]) -> tuple[Any, list[str]]:
    """`schema` with its `$ref`s into `params`' `$defs` inlined, and the refs that couldn't be
    (each met again inside itself), in the order met. A `$ref` beside other keywords becomes
    `allOf: [TARGET]` beside them (2020-12 applies both)."""
    stuck: list[str] = []

    def walk(node: Any, trail: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, trail) for item in node]
        if not isinstance(node, dict):
            return node
        rest = {k: v if k in _DATA else walk(v, trail) for k, v in node.items() if k != "$ref"}
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith(_PREFIX):
            return rest if "$ref" not in node else {**rest, "$ref": ref}
        found = resolve_ref(params, ref)
        if found is None or ref in trail:
            if found is not None and ref not in stuck:
                stuck.append(ref)
            return {**rest, "$ref": ref}
        inlined = walk(found[1], trail | {ref})
        return {"allOf": [inlined], **rest} if rest else inlined

    return walk(schema, frozenset()), stuck
