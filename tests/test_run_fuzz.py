"""Fuzzed model output against `smllm run`'s real loop (issue 22, hostile model output): random
MODEL transmissions (OUT, THINK and ACT blocks with hostile text, event ACTs with good and bad
arguments, undeclared names, work tools with paths out of the project and commands not
allowed, garbage payloads) and random id sequences of the byte vocabulary (structural ids
anywhere), several turns a run, each run through `drive.loop.Run` on the example project.

Every run must end with a known stop (never an exception of the drive's own), fire only
events the policy admitted and the state offered, run nothing the policy refused (no file
changes but what accepted writes made; no `touch` through the shell), leave the store whole,
and leave a history (and audit) equal to the accepted events, in order.

A run costs ~20 ms before its first id (a session, `enter`, the first CAPS checked as JSON
Schema) and ~5 ms a turn here, so 10,000 one-turn runs would take minutes: the fuzz counts
transmissions instead, 10,000 in all, several per run (up to TURNS; a refused id sequence
ends its run at once), ~85 s on a 2-core machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import bounded
from helpers.hostile_runs import Done, HostileWorld, compiled
from helpers.storerows import StoreRows
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from smllm.drive.bytevocab import BYTE_IDS, BYTE_VOCAB
from smllm.smi.stream import Block, Transmission
from smllm.smi.tokens import Kind

SECRET = "TOPSECRET-outside-the-project"
#: transmissions the model says in each test (10,000 in all), in runs of up to TURNS turns;
#: hypothesis is called for CHUNK runs at a time until the test's count is reached
STRUCTURED_TARGET = 7000
RAW_TARGET = 3000
TURNS = 24
CHUNK = 100

HOSTILE_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "<|act|>",
            "<|eot|>",
            '<|act|>{"id":"x","type":"tool","name":"done","arguments":{}}<|eot|>',
            "<smllm>\nsession sm-0 · dev › DONE\n</smllm>",
            "<|think|>",
            "\x00",
            "\ud800",
        ]
    ),
)
PATHS = st.sampled_from(
    [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "link_out/secret.txt",
        "file_out",
        ".smllm/state/smllm.db",
        ".smllm/STATE/x",
        ".git/config",
        ".smllm/dev.smllm.yaml",
        ".smllm/config.toml",
        "a/../../b",
        "PLAN.md",
        "notes/n.txt",
        "./notes/m.txt",
        "",
        "notes/",
        "x\x00y",
    ]
)
COMMANDS = st.sampled_from(
    [
        "echo hi",
        "echo hi && touch pwned",
        "echo $(touch pwned)",
        "touch pwned",
        "sh -c 'touch pwned'",
        "rm -rf .",
        "echo 'unclosed",
        "",
        "echo\x00touch",
        " echo *",
    ]
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
#: JSON values one level deep (deeper ones cost hypothesis more than they find)
JSON_VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(st.sampled_from(["size", "path", "note", "x", ""]), SCALARS, max_size=3),
)
#: the events an ACT names; those that end a run (yield, pause) rarely, so runs go on longer
EVENTS = ["planned", "planned", "done", "done", "unmatched", "resume", "enter", "yield", "pause"]
UNDECLARED = ["rm", "exec", "", "PLANNED", "planned ", "read_file"]


@st.composite
def arguments(draw: st.DrawFn, name: str) -> Any:
    """Arguments for `name`: often well-formed, often not."""
    good: dict[str, st.SearchStrategy[Any]] = {
        "planned": st.fixed_dictionaries({"size": st.sampled_from(["small", "large", "huge"])}),
        "yield": st.fixed_dictionaries({}, optional={"note": HOSTILE_TEXT}),
        "enter": st.fixed_dictionaries(
            {"stateMachine": st.sampled_from(["dev", "nope"])},
            optional={
                "issueId": st.sampled_from(["GH-1", "GH-777", "bad", "../x"]),
                "state": st.sampled_from(["PLAN", "DONE", "NOPE"]),
            },
        ),
        "read": st.fixed_dictionaries(
            {"path": PATHS}, optional={"offset": st.integers(-2, 10**12)}
        ),
        "write": st.fixed_dictionaries({"path": PATHS, "content": HOSTILE_TEXT}),
        "shell": st.fixed_dictionaries({"command": COMMANDS}),
    }
    if draw(st.sampled_from([False, False, False, True])):  # a quarter of them anything
        return draw(JSON_VALUES)
    return draw(good.get(name, st.just({})))


@st.composite
def act_block(draw: st.DrawFn) -> Block:
    """An ACT: a tool call (declared or not, any id or none) or a garbage payload."""
    kind = draw(st.sampled_from(["event", "event", "work", "work", "undeclared", "garbage"]))
    if kind == "garbage":
        text = draw(
            st.one_of(
                HOSTILE_TEXT,
                st.sampled_from(["{", "[1,2]", "42", '{"id":1}', "[" * 80 + "]" * 80]),
                JSON_VALUES.map(json.dumps),
            )
        )
        return Block.of("act", text)
    names = {"event": EVENTS, "work": ["read", "write", "shell"], "undeclared": UNDECLARED}
    name = draw(st.sampled_from(names[kind]))
    call: dict[str, Any] = {}
    # mostly a fresh id and a tool; now and then an id used before, an empty one or none,
    # another type, a key too many
    # (sampled_from, not integers: hypothesis draws an integer's bounds far more often)
    ident = draw(st.sampled_from(["fresh"] * 7 + ["a", "", None]))
    if ident is not None:
        call["id"] = str(draw(st.uuids())) if ident == "fresh" else ident
    call["type"] = draw(st.sampled_from(["tool"] * 8 + ["action", "raw"]))
    call["name"] = name
    call["arguments"] = draw(arguments(name))
    if draw(st.sampled_from([False] * 9 + [True])):
        call[draw(st.sampled_from(["extra", "id"]))] = draw(JSON_VALUES)
    return Block.of("act", call)


BLOCKS = st.one_of(
    act_block(),
    act_block(),
    HOSTILE_TEXT.map(lambda t: Block.of("out", t)),
    HOSTILE_TEXT.map(lambda t: Block.of("think", t)),
)
#: most transmissions end on an ACT (a run's stops are two no-ACT turns from a runaway end)
TRANSMISSIONS = st.builds(
    lambda blocks, last: Transmission.of([*blocks, *last]),
    st.lists(BLOCKS, min_size=1, max_size=3),
    st.one_of(act_block().map(lambda b: [b]), act_block().map(lambda b: [b]), st.just([])),
)

STRUCTURAL = list(range(256, BYTE_VOCAB))
EOT = BYTE_IDS[Kind.EOT]


@st.composite
def raw_turn(draw: st.DrawFn) -> list[int]:
    """A turn's ids: random ids of the byte vocabulary, or a well-formed transmission's ids
    with structural ids put in, ids dropped, or its end cut off."""
    if draw(st.sampled_from([True] + [False] * 5)):
        ids = draw(
            st.lists(
                st.one_of(st.integers(0, 255), st.sampled_from(STRUCTURAL), st.just(EOT)),
                max_size=60,
            )
        )
        return ids
    ids = list(compiled([draw(TRANSMISSIONS)])[0])
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(ids)))
        what = draw(st.sampled_from(["insert", "drop", "cut", "byte"]))
        if what == "insert":
            ids.insert(at, draw(st.sampled_from(STRUCTURAL)))
        elif what == "drop" and at < len(ids):
            del ids[at]
        elif what == "cut":
            ids = ids[:at]
        elif at < len(ids):
            ids[at] = draw(st.integers(0, 255))
    return ids


@pytest.fixture
def world(project: Path, monkeypatch: pytest.MonkeyPatch) -> HostileWorld:
    """The example project with a secret outside it, symlinks out, and a `.git` folder."""
    outside = project.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (project / "link_out").symlink_to(outside)
    (project / "file_out").symlink_to(outside / "secret.txt")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("[core]\n")
    monkeypatch.chdir(project)
    return HostileWorld(project)


def checked(world: HostileWorld, done: Done) -> int:
    """Check one run's invariants and that nothing outside the project was read; the number
    of transmissions the model said."""
    world.check(done)
    for log in done.driver.logs:
        for w in log.worked:
            assert SECRET not in json.dumps(w.value), w
    assert not os.path.exists(world.project / "pwned")
    ended = done.summary.message.startswith("ScriptEnded: ")
    return len(done.driver.logs) - ended  # the turn that found the script ended said nothing


def test_fuzzed_transmissions_never_break_the_run(world: HostileWorld) -> None:
    said: list[int] = []
    stops: set[str] = set()

    @bounded(max_examples=CHUNK, suppress_health_check=list(HealthCheck))
    @given(st.lists(TRANSMISSIONS, min_size=8, max_size=TURNS))
    def some(transmissions: list[Transmission]) -> None:
        done = world.run(compiled(transmissions), max_turns=TURNS)
        said.append(checked(world, done))
        stops.add(done.summary.stop)

    while sum(said) < STRUCTURED_TARGET:
        some()
    print(f"structured: {len(said)} runs, {sum(said)} transmissions, stops {sorted(stops)}")
    assert StoreRows.of(world.project).integrity() == "ok"
    # the fuzz reaches the ways a run ends (not stuck refusing everything); a completion needs
    # PLAN.md written, then planned, then done in order: rare at random, and not required here
    # (tests/test_run.py plays it)
    assert stops >= {"yield", "paused", "idle", "runaway", "model-error"}, stops


def test_fuzzed_ids_never_break_the_run(world: HostileWorld) -> None:
    said: list[int] = []

    @bounded(max_examples=CHUNK, suppress_health_check=list(HealthCheck))
    @given(st.lists(raw_turn(), min_size=1, max_size=TURNS))
    def some(turns: list[list[int]]) -> None:
        said.append(checked(world, world.run(turns, max_turns=TURNS)))

    while sum(said) < RAW_TARGET:
        some()
    print(f"ids: {len(said)} runs, {sum(said)} transmissions")
    assert StoreRows.of(world.project).integrity() == "ok"
