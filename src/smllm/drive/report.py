"""What a run shows as it goes, and its summary. On a terminal, a live view: each turn's ACTs
and their results, tokens and time, and a progress line while the model generates; elsewhere
quiet logs, one line a turn. Everything goes to stderr: stdout holds only the summary (a
sentence, or the `--json` object)."""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from ..smi.caps import Action
from ..smi.parser import BlockStart
from ..smi.runtime import TurnResult

__all__ = ["Report", "Summary", "Totals", "outcomes"]


@dataclass
class Totals:
    """A run's counts so far."""

    turns: int = 0
    fed: int = 0
    generated: int = 0
    accepted: int = 0
    refused: int = 0
    events: int = 0


@dataclass
class Summary:
    """The run's outcome (`--json` prints `to_json()`)."""

    session: str
    stop: str  # complete, yield, paused, idle, runaway, max-turns, context-full, model-error,
    # interrupted
    message: str
    machine: str | None
    state: str | None
    instance: str | None
    ref: str | None
    totals: Totals = field(default_factory=Totals)
    final: str | None = None  # the model's last words after completion (its OUT text)
    transcript: str | None = None

    @property
    def exit_code(self) -> int:
        if self.stop in ("complete", "yield", "paused", "idle"):
            return 0
        return 130 if self.stop == "interrupted" else 1

    def to_json(self) -> dict[str, Any]:
        t = asdict(self.totals)
        return {
            "session": self.session,
            "stop": self.stop,
            "message": self.message,
            "machine": self.machine,
            "state": self.state,
            "instance": self.instance,
            "ref": self.ref,
            "turns": t["turns"],
            "tokens": {"fed": t["fed"], "generated": t["generated"]},
            "acts": {"accepted": t["accepted"], "refused": t["refused"]},
            "events": t["events"],
            "final": self.final,
            "transcript": self.transcript,
        }


#: what a terminal would act on rather than show: C0 and C1 controls (escape sequences that set
#: a title or clear the screen), and the bidirectional overrides that reorder what is shown
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(text: str) -> str:
    """The model's text made safe to print: every control escaped (`\x1b`, `\u202e`)."""
    return _CONTROLS.sub(lambda m: ascii(m[0])[1:-1], text)


def _short(value: Any, width: int = 72) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = _visible(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


class Report:
    """Live (a terminal) or quiet (a log) output of a run, on `out` (stderr)."""

    def __init__(self, out: TextIO | None = None, live: bool | None = None) -> None:
        self.out = out if out is not None else sys.stderr
        self.live = live if live is not None else self.out.isatty()
        self._started = 0.0  # when the turn began (the progress line's clock)
        self._drawn = 0.0  # when the progress line was last drawn
        self._block = ""  # the block the model is writing
        self._shown = False

    def line(self, text: str) -> None:
        self._clear()
        self.out.write(text + "\n")
        self.out.flush()

    def begin_turn(self, number: int, where: str) -> None:
        self._started = self._drawn = time.monotonic()
        self._block = ""
        if self.live:
            self.line(f"── turn {number} · {where}")

    def event(self, item: object) -> None:
        """A parser event while the model generates: the progress line says which block the
        model is writing and for how long (redrawn at most ten times a second)."""
        if not self.live:
            return
        now = time.monotonic()
        changed = isinstance(item, BlockStart) and item.kind.tag != self._block
        if changed:
            self._block = item.kind.tag if isinstance(item, BlockStart) else self._block
        if changed or now - self._drawn >= 0.1:
            self._drawn = now
            what = self._block or "starting"
            self.out.write(f"\r\x1b[K  generating: {what} · {now - self._started:.1f} s")
            self.out.flush()
            self._shown = True

    def turn(self, number: int, result: TurnResult, ms: float, where: str) -> None:
        """A turn's ACTs and results, tokens and time."""
        acts = _acts(result)
        cost = f"fed {result.prompt_tokens} · generated {len(result.generated)} · {ms:.0f} ms"
        if self.live:
            said = _said(result)
            if said:
                self.line(f"  “{_short(said)}”")
            for line in acts:
                self.line(f"  {line}")
            if not acts:
                self.line("  (no ACT: a stop)")
            self.line(f"  {cost} · now {where}")
        else:
            what = "; ".join(acts) if acts else "no ACT"
            self.line(f"turn {number}: {what}; {cost}; now {where}")

    def _clear(self) -> None:
        if self._shown:
            self.out.write("\r\x1b[K")
            self._shown = False


def _said(result: TurnResult) -> str:
    return " ".join(b.text for b in result.model.blocks if b.kind.tag == "out")


def outcomes(result: TurnResult) -> list[tuple[Action | None, str, str]]:
    """Each ACT of a turn with what came of it: ("ok" | "refused" | "failed" | "pending", a
    short reason) — refused at admission, or run and answered ok or not."""
    answered: dict[str, Any] = {}
    if result.obs is not None:
        for block in result.obs.blocks:
            try:
                value = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("caused_by"), str):
                answered[value["caused_by"]] = value
    out: list[tuple[Action | None, str, str]] = []
    for action, refusal in zip(result.actions, result.refusals, strict=True):
        if refusal is not None:
            out.append((action, "refused", f"{refusal.type}: {refusal.message}"))
            continue
        found = answered.get(action.id or "") if action is not None else None
        if found is None:
            out.append((action, "pending", ""))
        elif found.get("ok") is True:
            out.append((action, "ok", ""))
        else:
            error = found.get("error") or {}
            out.append((action, "failed", f"{error.get('type')}: {error.get('message')}"))
    return out


def _acts(result: TurnResult) -> list[str]:
    """One line per ACT: its name and arguments, and what came of it."""
    lines = []
    for action, outcome, why in outcomes(result):
        name = _visible(str(action.name)) if action is not None and action.name else "(unreadable)"
        args = _short(action.arguments, 48) if action is not None else ""
        mark = "✓" if outcome == "ok" else "·" if outcome == "pending" else "✗"
        tail = f" → {outcome} ({_short(why, 100)})" if why else ""
        lines.append(f"{mark} {name} {args}{tail}")
    return lines
