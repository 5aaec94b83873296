"""A run's transcript, beside its session in smllm's state folder: `runs/KEY/run-N.turns.jsonl`
(one line a turn: what was fed and generated, as ids and in the native JSON form) and
`runs/KEY/run-N.smi.jsonl` (the whole conversation as one `{"transmissions": …}` line, the
form `smllm smi compile` reads as training data: labels on the model's side only). Each turn's
line goes down in one write; the conversation file is written whole once, when the run ends (a
file rewritten and synced every turn cost milliseconds a turn, growing with the conversation),
so a run killed outright leaves whole turn lines, which hold the same transmissions."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ..files import replace_file
from ..smi.convert import to_native
from ..smi.stream import Transmission
from ..store.user import state_home

__all__ = ["Transcript", "runs_folder"]

_RUN = re.compile(r"^run-([0-9]+)\.turns\.jsonl$")


def runs_folder(key: str) -> str:
    """Where session `key`'s runs are kept."""
    return os.path.join(state_home(), "runs", key)


class Transcript:
    """The files of one run of session `key` (the next free run number)."""

    def __init__(self, key: str) -> None:
        self.folder = runs_folder(key)
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        taken = [int(m[1]) for name in os.listdir(self.folder) if (m := _RUN.match(name))]
        self.number = max(taken, default=0) + 1
        base = os.path.join(self.folder, f"run-{self.number}")
        self.turns_path = f"{base}.turns.jsonl"
        self.conversation_path = f"{base}.smi.jsonl"
        self.conversation: list[Transmission] = []

    def turn(
        self,
        number: int,
        runtime: Transmission,
        model: Transmission | None,
        fed: Sequence[int],
        generated: Sequence[int],
        ms: float,
        note: str | None = None,
    ) -> None:
        """Record one turn (`model` None: the turn was fed but never answered)."""
        self.conversation.append(runtime)
        if model is not None:
            self.conversation.append(model)
        line: dict[str, Any] = {
            "turn": number,
            "runtime": to_native([runtime])["transmissions"][0],
            "model": to_native([model])["transmissions"][0] if model is not None else None,
            "fed": list(fed),
            "generated": list(generated),
            "ms": round(ms, 3),
        }
        if note is not None:
            line["note"] = note
        self._append(self.turns_path, line)

    def tail(self, runtime: Transmission) -> None:
        """The last runtime transmission, which no model turn answered (the run ended on it):
        in the conversation, so training data holds the final observation too."""
        self.conversation.append(runtime)

    def save(self) -> None:
        """Write the conversation file (at the run's end, however it ends)."""
        text = json.dumps(to_native(self.conversation), ensure_ascii=False) + "\n"
        replace_file(self.conversation_path, text.encode("utf-8"))

    @staticmethod
    def _append(path: str, value: dict[str, Any]) -> None:
        data = (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)  # one write: a line is whole or absent
        finally:
            os.close(fd)
