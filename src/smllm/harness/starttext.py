"""The session-start hook's text, kept short enough that no client moves it to a file.

Claude moves `additionalContext` over 10,000 characters to a file and shows the agent a 2 KB
preview; Codex does so over 2,500 tokens (cli-and-harnesses.md §6a). A text over
START_LIMIT characters keeps its header, notes, lists and events list, and cuts the
`<instructions>`, ending them with a line that says how to read them all.
"""

from __future__ import annotations

from ..engine.reply import Reply
from ..text.block import render

__all__ = ["START_LIMIT", "cut_note", "start_text"]

#: the longest session-start text; Claude's own limit is 10,000 characters
START_LIMIT = 9000


def cut_note(key: str | None) -> str:
    """The line that ends cut instructions."""
    session = f'{{ session: "{key}" }}' if key else "{ session }"
    shell = f" or run smllm session show {key}" if key else ""
    return (
        "[The instructions are cut here to keep this message short. To read them in full, "
        f"call the smllm tool with {session}{shell}.]"
    )


def _prefix(text: str, room: int) -> str:
    """The start of `text` in at most `room` characters, ending at a line break when one
    falls in its second half."""
    if room <= 0:
        return ""
    cut = text[:room]
    at = cut.rfind("\n")
    if at > room // 2:
        cut = cut[:at]
    return cut.rstrip()


def start_text(reply: Reply, limit: int = START_LIMIT) -> str:
    """The reply's block, its instructions cut so that the whole fits in `limit` characters
    where the rest of the block leaves them room (header, notes and events are never cut)."""
    text = render(reply)
    if len(text) <= limit or not reply.instructions:
        return text
    note = cut_note(reply.header.session)
    bare = render(reply._replace(instructions=(note,)))
    kept = _prefix("\n\n".join(reply.instructions), limit - len(bare) - 2)
    return render(reply._replace(instructions=(kept, note) if kept else (note,)))
