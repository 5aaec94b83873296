"""Playing one engine scenario (test_properties.py) through `App`, checking every step."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

from helpers.property_world import (
    CASES,
    CLEANED_SLOT,
    CONFIG,
    HARNESSES,
    KEYLESS,
    OFFERED,
    PROMPT,
    SAME,
    STOP,
    UNKNOWN,
    UNKNOWN_KEY,
    VALUES,
    VIEW,
    Inst,
    Peek,
    PgTarget,
    Scenario,
    Step,
    View,
    build_project,
    decode,
    environment,
    instance_tables,
    machines_of,
    rows,
    write_config,
)
from helpers.scripted_host import ScriptedHost

from smllm.api.app import App, CallError, Result
from smllm.engine.reply import Reply
from smllm.engine.stop import Decision
from smllm.machine.model import Machine
from smllm.text.block import render

# -- playing a scenario ------------------------------------------------------------------------


class Played(NamedTuple):
    replies: list[str]  # one line per call: how it ended and its text (or error)
    snapshots: list[str]  # the stores after each call, as JSON


class Player:
    def __init__(
        self, root: Path, case: str, scenario: Scenario, check: bool, pg: PgTarget | None = None
    ) -> None:
        self.root = root
        self.case = case
        self.scenario = scenario
        self.check = check
        self.pg = pg
        self.machines = machines_of(case)
        self.project = build_project(root, case, pg)
        self.host = ScriptedHost(scenario.seed, step=timedelta(seconds=scenario.tick))
        self.app = App(cwd=str(self.project), host=self.host)
        self.keys: list[str] = []
        self.who = 0  # the session index of the latest call, for SAME
        self.replies: list[str] = []
        self.snapshots: list[str] = []
        # the user store (engine.md §10) and the config's default `[state] dir`, or PG's rows
        self.peek = Peek(
            root, (root / "xdg-state" / "smllm", self.project / ".smllm" / "state"), pg
        )
        self.last = self.peek.snapshot()
        self.previous = self.last
        self._view_last: View | None = None
        self._view_previous: View | None = None
        self.seen: dict[str, tuple[int, dict[str, int]]] = {}  # id → (version, visits)
        self.configured = set(self.machines)  # the machines the config lists now
        self.guard_commands = {
            t.guard.command
            for m in self.machines.values()
            for state in m.states.values()
            for t in (*(t for ts in state.on.values() for t in ts), *state.always)
            if t.guard is not None and t.guard.command is not None
        }

    def normal(self, text: str) -> str:
        return text.replace(str(self.root), "<ROOT>")

    def record(self, what: str) -> None:
        self.replies.append(self.normal(what))
        snap = self.peek.snapshot()
        self.snapshots.append(self.normal(json.dumps(snap, sort_keys=True, ensure_ascii=False)))
        self.previous, self.last = self.last, snap
        self._view_previous, self._view_last = self._view_last, None

    @property
    def view_last(self) -> View:
        """The records after the latest step (decoded when first needed)."""
        if self._view_last is None:
            self._view_last = decode(self.last)
        return self._view_last

    @property
    def view_previous(self) -> View:
        """The records before the latest step."""
        if self._view_previous is None:
            self._view_previous = decode(self.previous)
        return self._view_previous

    # -- resolving a step ----------------------------------------------------------------------

    def labels(self) -> list[str]:
        out: list[str] = []
        for rec in self.view_last.instances.values():
            out.append(rec["ref"] if rec["ref"] is not None else rec["id"])
        return out

    def value(self, v: Any) -> Any:
        if isinstance(v, Inst):
            labels = self.labels()
            return labels[v.n % len(labels)] if labels else None
        return v

    def held_state(self, key: str | None) -> tuple[Machine, str] | None:
        """The machine and state the session holds, if it still holds its instance."""
        if key is None:
            return None
        v = self.view_last
        s = v.sessions.get(key)
        if s is None or s["holding"] is None:
            return None
        rec = v.instances.get(s["holding"]["id"])
        if rec is None or rec["holder"] != key or rec["status"] != "active":
            return None
        m = self.machines.get(rec["machine"])
        if m is None or rec["state"] not in m.states:
            return None
        return m, rec["state"]

    def offered(self, key: str | None, source: str) -> list[str]:
        if key is None or key == UNKNOWN_KEY:
            return ["enter"]
        result = self.app.view(key)
        names = [item.name for item in result.reply.events.items] if result.reply.events else []
        held = self.held_state(key)
        if source == "host" and held is not None:
            machine, state = held
            names = [*machine.states[state].on, *[n for n in names if n not in machine.events]]
        return names or ["enter"]

    def fit(self, seed: int, key: str | None, event: str) -> tuple[tuple[str, Any], ...]:
        """Params that mostly pass the event's checks, drawn from `seed`."""
        rng = random.Random(seed)

        def pick(name: str) -> Any:
            good, bad = VALUES.get(name, (("x",), (1,)))
            return self.value(rng.choice(good if rng.random() < 0.85 or not bad else bad))

        if event == "enter":
            ids = list(self.machines)
            machine = self.machines[rng.choice(ids)]
            out: list[tuple[str, Any]] = [
                ("stateMachine", machine.id if rng.random() < 0.95 else "nope")
            ]
            if rng.random() < 0.6:
                out.append((machine.ref.param, pick(machine.ref.param)))
            if rng.random() < 0.3:
                states = [*machine.entry_points(), *machine.states]
                out.append(("state", rng.choice(states)))
            return tuple(out)
        if event == "yield":
            return (("note", pick("note")),) if rng.random() < 0.4 else ()
        held = self.held_state(key)
        if held is None:
            return ()
        machine, state = held
        specs = machine.states[state].params.get(event, ())
        return tuple(
            (spec.name, pick(spec.name))
            for spec in specs
            if rng.random() < (0.95 if spec.required else 0.5)
        )

    # -- the play ------------------------------------------------------------------------------

    def play(self) -> Played:
        for i in range(self.scenario.bound):
            bound = self.app.bind(HARNESSES[i], f"host-session-{i}", str(self.project))
            assert bound is not None and bound.session is not None
            self.keys.append(bound.session.key)
            self.record(f"bind {bound.session.key}\n{bound.text()}")
            if self.check:
                self.check_bind(bound.session.key)
        first = next(iter(self.machines))
        for _ in range(self.scenario.paused):
            self.step(Step(0, "enter", 0, (("stateMachine", first),), "agent", frozenset(), True))
            self.step(Step(SAME, "pause", 0, (), "agent", frozenset(), True))
        for step in self.scenario.steps:
            self.step(step)
        assert not self.peek.strays(), f"stores the checks did not read: {self.peek.strays()}"
        return Played(self.replies, self.snapshots)

    def step(self, step: Step) -> None:
        if step.who == KEYLESS:
            key: str | None = None
        elif step.who == UNKNOWN:
            key = UNKNOWN_KEY
        else:
            if step.who != SAME:
                self.who = step.who % len(self.keys)
            key = self.keys[self.who]
        event = step.event
        if event == CONFIG:
            self.toggle_config()
            return
        if event in (STOP, PROMPT):
            self.hook(step, key or UNKNOWN_KEY, event)
            return
        if event == OFFERED:
            names = self.offered(key, step.source)
            event = names[step.pick % len(names)]
        if isinstance(step.params, int):
            params = self.fit(step.params, key, event)
        else:
            params = tuple((n, self.value(v)) for n, v in step.params)
        self.host.files = set(step.files)
        self.host.ok = step.ok
        call = f"{key} {event} {params!r} {step.source}"
        n = len(self.host.calls)
        try:
            if event == VIEW:
                result: Result = self.app.view(key)
            else:
                result = self.app.fire(key, event, params, step.source)
        except CallError as exc:
            self.record(f"{call}\nCallError: {exc}")
            if self.check:
                assert not self.host.calls[n:], f"{call}: a CallError ran a command"
                assert key is None or key == UNKNOWN_KEY, (call, exc)
                assert key == UNKNOWN_KEY or event != "enter", (call, exc)
                assert rows(self.previous) == rows(self.last), f"{call}: a CallError wrote"
                self.check_always(call)
            return
        text = result.text()
        ran = self.host.calls[n:]
        shown = "".join(
            f"\nran {c.command.shown()} in {c.cwd} with {sorted(c.env.items())}" for c in ran
        )
        self.record(f"{call}\n{'ok' if result.ok else 'refused'}{shown}\n{text}")
        if self.check:
            if event == VIEW or (event == "listPaused" and result.ok):
                assert not ran, f"{call}: a read ran a command"
            elif not result.ok:
                # engine.md §4.1: every check that can refuse comes before the first action
                actions = [c.command for c in ran if c.command not in self.guard_commands]
                assert not actions, f"{call}: refused after running actions {actions}"
            assert key is not None or event == "enter", call
            assert key != UNKNOWN_KEY, call
            left = self.left(self.view_previous, key)
            if event == VIEW or (event == "listPaused" and result.ok):
                assert rows(self.previous) == rows(self.last), f"{call}: a read wrote\n{text}"
                if left is not None:
                    said = (*result.reply.notes, result.reply.error)
                    assert left in said, f"{call}: without the §7.1 message {left!r}\n{text}"
            elif left is None and (unconf := self.unconfigured(self.view_previous, key)):
                if event == "pause" and not params:
                    assert result.ok, f"{call}: §7.2 lets pause go\n{text}"
                    self.check_accepted(call, key, event, result)
                else:
                    assert not result.ok and result.reply.error == unconf, (call, text)
                    self.check_refused(call, key, result, left)
            elif result.ok:
                assert left is None, f"{call}: accepted, but the instance had left: {left}"
                self.check_accepted(call, key, event, result)
            else:
                self.check_refused(call, key, result, left)
            self.check_always(call)
        if key is None and result.ok and result.session is not None:
            self.keys.append(result.session.key)
            self.who = len(self.keys) - 1

    def toggle_config(self) -> None:
        """engine.md §7.2: the first machine leaves the config (or comes back)."""
        files = [name for _, name in CASES[self.case]]
        first = next(iter(self.machines))
        if first in self.configured:
            self.configured.discard(first)
            files = files[1:]
        else:
            self.configured.add(first)
        write_config(self.project, files, self.pg)
        self.record(f"{CONFIG} {sorted(self.configured)}")
        if self.check:
            assert rows(self.previous) == rows(self.last)

    def hook(self, step: Step, key: str, event: str) -> None:
        """The stop hook or the user-prompt hook of the session (engine.md §9)."""
        continuing = (None, True, False)[step.pick % 3]
        call = f"{key} {event} continuing={continuing}"
        try:
            n = len(self.host.calls)
            if event == STOP:
                out = self.app.stop(key, continuing)
                what = f"{out.decision}\n{render(out.reply) if out.reply else ''}"
            else:
                self.app.prompt_submitted(key)
                what = "prompted"
        except CallError as exc:
            self.record(f"{call}\nCallError: {exc}")
            if self.check:
                assert key == UNKNOWN_KEY, (call, exc)
                assert rows(self.previous) == rows(self.last), f"{call}: a CallError wrote"
            return
        self.record(f"{call}\n{what}")
        if self.check:
            assert not self.host.calls[n:], f"{call}: a hook ran a command"
            assert key != UNKNOWN_KEY, call
            if event == STOP:
                self.check_stop(call, key, continuing, out.decision, out.reply)
            else:
                self.check_prompt(call, key)
            self.check_always(call)

    # -- the checks ----------------------------------------------------------------------------

    def kind_label(self, inst: dict[str, Any]) -> tuple[str, str]:
        """KIND and LABEL as messages name an instance; KIND is `instance` while its machine
        is not configured (engine.md §7.2: its `meta.instance.kind` is not loaded)."""
        label = inst["ref"] if inst["ref"] is not None else inst["id"]
        machine = inst["machine"]
        return (self.machines[machine].kind if machine in self.configured else "instance"), label

    def left(self, v: View, key: str | None) -> str | None:
        """engine.md §7.1: the message a call of the session must get because its instance has
        left it, or None when it has not (or the session holds nothing)."""
        s = v.sessions.get(key) if key is not None else None
        if s is None or s["holding"] is None:
            return None
        inst = v.instances.get(s["holding"]["id"])
        if inst is None:
            return f"instance {s['holding']['id']} no longer exists; you are in idle"
        kind, label = self.kind_label(inst)
        if inst["holder"] is not None and inst["holder"] != key:
            return f"{kind} {label} moved to session {inst['holder']}; you are in idle"
        if inst["status"] != "active":
            return f"{kind} {label} is {inst['status']}; you are in idle"
        return None

    def unconfigured(self, v: View, key: str | None) -> str | None:
        """engine.md §7.2: the refusal of every event but `pause` while the session holds an
        instance of a machine the config no longer lists, or None."""
        s = v.sessions.get(key) if key is not None else None
        if s is None or s["holding"] is None or s["holding"]["machine"] in self.configured:
            return None
        return (
            f"state machine {s['holding']['machine']} is not configured (its file might have "
            "errors); fix the config, then fire any event: the session goes on where it was"
        )

    def stale_slot(self, v: View, key: str) -> str | None:
        """engine.md §5.2: the message of a `resume` from idle whose slot is stale, or None."""
        slot = v.sessions[key]["interrupted"]
        if slot is None:
            return None
        inst = v.instances.get(slot["id"])
        if inst is None:
            return "the interrupted instance is no longer interrupted"
        if inst["holder"] is not None and inst["holder"] != key:
            return f"{self.kind_label(inst)[1]} moved to session {inst['holder']}"
        if inst["status"] != "interrupted":
            return "the interrupted instance is no longer interrupted"
        return None

    def session_change(self, call: str, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The session's record before and after a hook, checking that nothing else changed
        but the session's audit records (returned ones are checked by the caller)."""
        assert instance_tables(self.previous) == instance_tables(self.last), (
            f"{call}: a hook wrote an instance"
        )
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{call}: a binding changed"
        for k in set(before.sessions) | set(after.sessions):
            if k != key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{call}: {k} changed"
        assert after.audit[: len(before.audit)] == before.audit
        return before.sessions[key], after.sessions[key]

    def audit_added(self) -> list[tuple[str, str]]:
        n = len(self.view_previous.audit)
        return [(s, kind) for s, kind, _ in self.view_last.audit[n:]]

    def check_stop(
        self,
        call: str,
        key: str,
        continuing: bool | None,
        decision: str,
        reply: Reply | None,
    ) -> None:
        """engine.md §9, rules 2 – 7."""
        old, new = self.session_change(call, key)
        left = self.left(self.view_previous, key)
        added = self.audit_added()
        unconfigured = left is None and self.unconfigured(self.view_previous, key) is not None
        if old["holding"] is None or (left is None and (unconfigured or old["yielded"])):
            assert decision is Decision.ALLOW, (call, decision)
            assert rows(self.previous) == rows(self.last), f"{call}: an allowed stop wrote"
        elif left is not None:
            assert decision is Decision.BLOCK, (call, decision)
            assert reply is not None and left in (*reply.notes, reply.error), (call, reply)
            self.check_written(call, old, new, holding=None, lastBlock=_digest(reply))
            assert added == [(key, "moved")], (call, added)
        elif old["blocks"] >= 1 and (continuing is not False or old["blocks"] >= 2):
            assert decision is Decision.RUNAWAY, (call, decision, old)
            assert added == [(key, "runaway")], (call, added)
            assert new == old, f"{call}: a runaway stop wrote the session"
        else:
            assert decision is Decision.BLOCK, (call, decision, old)
            assert reply is not None and reply.events is not None, call
            assert not reply.instructions, f"{call}: a blocked stop has no instructions"
            self.check_written(call, old, new, blocks=old["blocks"] + 1, lastBlock=_digest(reply))
            assert added == [(key, "block")], (call, added)

    def check_prompt(self, call: str, key: str) -> None:
        """engine.md §9: a user prompt clears `yielded` and `blocks`, writing only then."""
        old, new = self.session_change(call, key)
        if not old["yielded"] and old["blocks"] == 0:
            assert rows(self.previous) == rows(self.last), f"{call}: a prompt wrote"
            return
        self.check_written(call, old, new, yielded=False, blocks=0)
        assert self.audit_added() == [(key, "prompt")]

    def check_written(
        self, call: str, old: dict[str, Any], new: dict[str, Any], **changes: Any
    ) -> None:
        """The session was written with `changes` and nothing else: its version moves by one
        and its lastActive moves (engine.md §3; with a stopped clock it stays)."""
        expected = {
            **old,
            **changes,
            "version": old["version"] + 1,
            "lastActive": new["lastActive"],
        }
        assert new == expected, f"{call}: the session changed otherwise: {old} → {new}"
        if self.scenario.tick:
            assert new["lastActive"] > old["lastActive"], f"{call}: lastActive stayed"

    def check_bind(self, key: str) -> None:
        before, after = self.view_previous, self.view_last
        assert instance_tables(self.previous) == instance_tables(self.last)
        assert key in after.sessions and key not in before.sessions
        assert after.audit[len(before.audit) :] == [(key, "bind", after.audit[-1][2])]

    def check_refused(self, call: str, key: str | None, result: Result, left: str | None) -> None:
        """engine.md §4.1: a refused call changes nothing but the documented clean-ups."""
        text = result.text()
        error = result.reply.error
        where = f"{call}: refused, but"
        assert error is not None and "<events>" in text, f"{where} no error or events\n{text}"
        assert instance_tables(self.previous) == instance_tables(self.last), (
            f"{where} an instance or history record changed\n{text}"
        )
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{where} a binding changed\n{text}"
        if key is None:
            assert text.startswith("<smllm>\nno session · idle\n"), f"{where} a session\n{text}"
            assert rows(self.previous) == rows(self.last), f"{where} the store changed\n{text}"
            return
        moved = left is not None
        stale = None if moved else self.stale_slot(before, key)
        cleaned = stale is not None and error == stale
        if moved:
            assert error == left, f"{where} not with the §7.1 message {left!r}\n{text}"
        else:
            assert not error.endswith("; you are in idle"), f"{where} the instance is here\n{text}"
            assert cleaned or not any(m in error for m in CLEANED_SLOT), (
                f"{where} the slot was not stale\n{text}"
            )
        if not (moved or cleaned):
            assert rows(self.previous) == rows(self.last), f"{where} the store changed\n{text}"
            return
        for k in set(before.sessions) | set(after.sessions):
            if k != key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{where} {k} changed"
        old, new = before.sessions[key], after.sessions[key]
        assert before.audit == after.audit[: len(before.audit)]
        added = after.audit[len(before.audit) :]
        if moved:
            # §7.1: back to idle, written, with a `moved` audit record
            self.check_written(where, old, new, holding=None)
            assert [(s, kind) for s, kind, _ in added] == [(key, "moved")], added
        else:
            # §5.2: the stale slot emptied, nothing else
            self.check_written(where, old, new, interrupted=None)
            assert not added, f"{where} an audit record was written"

    def check_accepted(self, call: str, key: str | None, event: str, result: Result) -> None:
        """engine.md §4.2, §11: an accepted event writes its instance(s), one history record
        each, the session and one audit record."""
        text = result.text()
        assert "\nerror: " not in text, f"{call}: accepted with an error\n{text}"
        reply = result.reply
        if reply.header.machine is not None and reply.completed is None:
            # agent-text.md §7: an entry block or `Yielded`, without an events list
            assert "<events>" not in text, f"{call}: an events list after a move\n{text}"
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{call}: a binding changed"
        assert list(before.instances) == list(after.instances)[: len(before.instances)]
        written = {i for i, rec in after.instances.items() if before.instances.get(i) != rec}
        assert written, f"{call}: accepted, but no instance was written"
        assert after.history[: len(before.history)] == before.history
        added = after.history[len(before.history) :]
        assert sorted(i for i, _ in added) == sorted(written), (
            f"{call}: history records {[i for i, _ in added]} for instances {sorted(written)}"
        )
        for i, rec in added:
            inst = after.instances[i]
            assert rec["version"] == inst["version"], (call, rec, inst)
            assert rec["to"] == inst["state"] and rec["status"] == inst["status"], (call, rec)
            old = before.instances.get(i)
            assert inst["version"] == (old["version"] + 1 if old else 1), (call, old, inst)
        session = result.session
        assert session is not None
        mine = after.sessions[session.key]
        assert mine["blocks"] == 0 and mine["yielded"] == (event == "yield"), (call, mine)
        for i in written:  # §2: whatever this call made active or interrupted, it holds
            inst = after.instances[i]
            if inst["status"] in ("active", "interrupted"):
                assert inst["holder"] == session.key, (call, inst)
        held = mine["holding"]
        assert held is None or after.instances[held["id"]]["status"] == "active", (call, mine)
        assert held is None or held["id"] in written, (call, mine)
        if key is not None and self.scenario.tick:
            old_last = before.sessions[key]["lastActive"]
            assert mine["lastActive"] > old_last, f"{call}: lastActive stayed"
        for k in set(before.sessions) | set(after.sessions):
            if k != session.key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{call}: {k} changed"
        assert after.audit[: len(before.audit)] == before.audit
        kinds = [(s, kind) for s, kind, _ in after.audit[len(before.audit) :]]
        expected = [(session.key, "event")]
        if key is None:
            expected.insert(0, (session.key, "bind"))
        assert kinds == expected, (call, kinds)

    def check_always(self, call: str) -> None:
        """After every call: visits and versions never decrease (§8, §12), no instance rests in
        a state with `always` (§12), and history agrees with the instance (§11)."""
        v = self.view_last
        by_instance: dict[str, list[dict[str, Any]]] = {}
        for i, rec in v.history:
            by_instance.setdefault(i, []).append(rec)
        for i, inst in v.instances.items():
            machine = self.machines[inst["machine"]]
            state = machine.states[inst["state"]]
            assert not state.always, f"{call}: {i} rests in {state.name}, which has always"
            assert (inst["status"] == "completed") == state.final, (call, inst)
            assert (inst["holder"] is not None) == (inst["status"] in ("active", "interrupted"))
            records = by_instance.get(i, [])
            assert records and records[-1]["version"] == inst["version"], (call, inst, records)
            assert [r["version"] for r in records] == list(range(1, inst["version"] + 1))
            visits: dict[str, int] = inst["visits"]
            if i in self.seen:
                version, old_visits = self.seen[i]
                assert inst["version"] >= version, f"{call}: version of {i} went down"
                for name, count in old_visits.items():
                    assert visits.get(name, 0) >= count, f"{call}: visits of {i} at {name} fell"
            self.seen[i] = (inst["version"], dict(visits))
        assert set(self.seen) <= set(v.instances), f"{call}: an instance was deleted"


def play(
    base: Path, case: str, scenario: Scenario, check: bool, pg: PgTarget | None = None
) -> Played:
    """Play `scenario` in `base` (with its instance store in PG's namespace, when given)."""
    base.mkdir()
    with environment(base, pg):
        player = Player(base, case, scenario, check, pg)
        try:
            return player.play()
        finally:
            player.peek.close()
            for store in player.app.opened.values():  # the server's connections are counted
                store.close()


def _digest(reply: Reply) -> str:
    """engine.md §9: a block records the digest of the text the hook shows, so the harness's
    continuation prompt (that same text) is told from the user's."""
    from smllm.engine.records import block_digest
    from smllm.text.block import render

    return block_digest(render(reply))
