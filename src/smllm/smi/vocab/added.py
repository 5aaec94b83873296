"""Which of a tokenizer's added tokens are *markup* and which are *content* (smi-notes §7), and
the one check that untrusted text never yields a forbidden id.

A tokenizer's added vocabulary mixes two things. *Markup*: specials, chat and tool markers,
anything that frames text rather than being text; a payload must never produce one, and a model
emits one only where the runtime allows (the SMI ids it may speak). *Content*: tokens a model
was trained to produce for ordinary text, such as GPT-NeoX's 23 whitespace runs (2..24 spaces;
Pythia and Mamba use them for every run of 2+ spaces, EleutherAI/gpt-neox#585); the plain
encoder produces them exactly where the full tokenizer would (parity), and the model may emit
them freely.

The rule (`classify`), first match wins, for each added token:

1. its text is one of the 32 SMI slot texts → markup ("an SMI token");
2. its text holds an SMI slot text plus other text (`<|eot|>\\n`, `x<|act|>`) → markup, and
   *unsafe*: the full tokenizer would match it instead of the SMI token, so the rendered text
   and the compiled ids would disagree; `install_tokens` refuses such a tokenizer and the audit
   flags it;
3. the caller names its text markup (`markup=`) → markup;
4. the caller names its text content (`content=`) → content (the caller's word wins over 5-8);
5. it is special → markup (what `skip_special_tokens` drops is never ordinary text);
6. its text looks like a tag: `<…>` with no space inside, `<|`, `|>`, `</`, or a name in square
   brackets (`[INST]`, `[/INST]`) → markup (a base vocabulary's `<tool_call>` is one);
7. its text is only whitespace → content;
8. its text is ordinary text: letters, marks, digits, spaces and punctuation other than the
   bracket characters `<>[]{}|` → content;
9. anything else (control characters, symbols, an empty text) → markup: when in doubt, forbid.

Then content must be safe: the text of a content token the model emits may be rendered and
tokenized again by a full tokenizer (a chat template, another engine, a log replayed), so a
content token whose text holds a markup token's text would let the model reach the markup
through plain text; it becomes markup (repeated until nothing changes: naming `"   "` markup on
NeoX takes every longer run with it), and when the caller named it content, that is an error.
Markup is forbidden to payloads (with the tokenizer's other special ids and the SMI block);
content ids are not.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..stream import InjectionError
from ..tokens import BLOCK_SIZE, slot_text

__all__ = ["AddedRole", "Role", "check_ids", "classify", "smi_text_held"]

Role = Literal["markup", "content"]

_SLOT_TEXTS = tuple(slot_text(slot) for slot in range(BLOCK_SIZE))
_TAG = re.compile(r"<[^<>\s]*>|<\||\|>|</|\[/?[A-Za-z_][^\[\]\s]*\]")
_BRACKETS = frozenset("<>[]{}|")


@dataclass(frozen=True)
class AddedRole:
    """One added token, its role and why; `unsafe` says why no tokenizer should hold it."""

    id: int
    text: str
    special: bool
    role: Role
    reason: str
    unsafe: str | None = None


def smi_text_held(text: str) -> str | None:
    """The first SMI slot text `text` holds *plus other text* (rule 2: `<|eot|>\\n`); None
    when it holds none, or is a slot text alone."""
    if text in _SLOT_TEXTS:
        return None
    return next((slot for slot in _SLOT_TEXTS if slot in text), None)


def _ordinary(text: str) -> bool:
    for char in text:
        if char in _BRACKETS:
            return False
        category = unicodedata.category(char)
        if category[0] in "LNM" or category == "Zs" or category[0] == "P":
            continue
        return False
    return True


def _first_reading(
    text: str, special: bool, content: Collection[str], markup: Collection[str]
) -> tuple[Role, str, str | None]:
    """(role, reason, unsafe) by rules 1-9 (module docstring)."""
    if text in _SLOT_TEXTS:
        return "markup", "an SMI token", None
    inside = smi_text_held(text)
    if inside is not None:
        why = f"holds the SMI token text {inside} plus other text"
        return "markup", why, f"{why}: a tokenizer would match it instead of {inside}"
    if text in markup:
        return "markup", "named markup by the caller", None
    if text in content:
        return "content", "named content by the caller", None
    if special:
        return "markup", "special", None
    if _TAG.search(text):
        return "markup", "tag-like text (<…>, <|, |>, </ or [NAME])", None
    if text and text.isspace():
        return "content", "whitespace only", None
    if text and _ordinary(text):
        return "content", "ordinary text (letters, digits, spaces, punctuation)", None
    return "markup", "not ordinary text (control, symbol or bracket characters)", None


def classify(
    backend: Any, *, content: Collection[str] = (), markup: Collection[str] = ()
) -> tuple[AddedRole, ...]:
    """Each added token of `backend` (a `tokenizers.Tokenizer`), by id, with its role (module
    docstring). `content`/`markup`: texts the caller names one or the other; ValueError when a
    text named content holds an SMI token's or a markup token's text."""
    rows: dict[int, AddedRole] = {}
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        text = str(token.content)
        role, reason, unsafe = _first_reading(text, bool(token.special), content, markup)
        if text in content and role == "markup":  # only an SMI text outranks the caller
            what = "is an SMI token" if unsafe is None else reason
            raise ValueError(f"{text!r} can't be content: it {what}")
        rows[token_id] = AddedRole(token_id, text, bool(token.special), role, reason, unsafe)
    changed = True
    while changed:  # content must not hold markup's text (module docstring)
        changed = False
        markup_texts = [r.text for r in rows.values() if r.role == "markup" and r.text]
        for token_id, row in rows.items():
            if row.role != "content":
                continue
            held = next((m for m in markup_texts if m in row.text), None)
            if held is None:
                continue
            if row.text in content:
                raise ValueError(
                    f"{row.text!r} can't be content: it holds the markup token {held!r}, so a "
                    "payload could reach the markup through it"
                )
            reason = f"holds the markup token {held!r}'s text"
            rows[token_id] = AddedRole(row.id, row.text, row.special, "markup", reason)
            changed = True
    return tuple(rows.values())


def check_ids(
    ids: Sequence[int], forbidden: frozenset[int], what: str, names: dict[int, str] | None = None
) -> None:
    """Raise `InjectionError` naming `what` if `ids` hold a `forbidden` id (with its text from
    `names` where known): the one check every encoder and the compiler run on untrusted text."""
    if forbidden.isdisjoint(ids):
        return
    at = next(n for n, i in enumerate(ids) if i in forbidden)
    name = (names or {}).get(ids[at])
    shown = f" ({name!r})" if name is not None else ""
    raise InjectionError(
        f"{what} encoded to a forbidden id {ids[at]}{shown} at position {at}: untrusted text "
        "must never yield a structural, special or markup token"
    )
