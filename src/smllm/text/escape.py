"""One line of outside text made safe inside the agent's text (agent-text.md): a ref, param,
note or command output can't break a line, nor open or close a block.

Apart from the block (text/block.py), which needs the engine's replies, because the status
line needs only this.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["escape"]

_TAG: Any = None  # compiled on the first `<`: most replies have none, and `re` costs ~5 ms


def escape(text: str) -> str:
    """One line of text from outside: line breaks as `\\n`/`\\r`, `<` of our tags as `&lt;`."""
    global _TAG
    if "\n" in text or "\r" in text:
        text = text.replace("\n", "\\n").replace("\r", "\\r")
    if "<" in text:
        if _TAG is None:
            import re

            _TAG = re.compile(r"<(?=/?(?:smllm|instructions|events))", re.IGNORECASE)
        text = _TAG.sub("&lt;", text)
    return text
