"""The user-prompt bookkeeping (engine.md §9): a prompt ends a yield and a run of blocks.

Apart from the views and the stop (engine/view.py) because the prompt hook runs on every user
message and needs only the session: this module loads no machine model.
"""

from __future__ import annotations

from .records import AuditRecord, Session, SessionWrite, iso, repeats_block

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from .host import Host

__all__ = ["prompt_submitted"]


def prompt_submitted(
    session: Session, host: Host, prompt: str | None = None
) -> tuple[SessionWrite | None, tuple[AuditRecord, ...]]:
    """A user prompt ends a yield and the run of blocks; writes only if that changes something.

    A prompt that repeats the text of the session's last block, while that block still
    counts, is the harness going on after it (Copilot fires its prompt hook then), not the
    user: it changes nothing (engine.md §9)."""
    if not session.yielded and session.blocks == 0:
        return None, ()
    if (
        prompt is not None
        and session.blocks >= 1
        and session.last_block is not None
        and repeats_block(session.last_block, prompt)
    ):
        return None, ()
    at = iso(host.now())
    new = session._replace(yielded=False, blocks=0, version=session.version + 1, last_active=at)
    sw = SessionWrite(new, False, session.holding, frozenset({"yielded", "blocks", "lastActive"}))
    # the values after the prompt, and what it cleared (issue 20 §8: the record read as if the
    # prompt had left the session yielded)
    detail = {
        "yielded": False,
        "blocks": 0,
        "cleared": {"yielded": session.yielded, "blocks": session.blocks},
    }
    return sw, (AuditRecord(at, "prompt", detail),)
