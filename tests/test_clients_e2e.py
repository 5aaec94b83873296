"""Issue 9 end to end with the four real agent clients, offline: Claude Code, Codex, GitHub
Copilot CLI and OpenCode, each after `smllm harness install NAME` in a fresh project and HOME,
driven by a scripted fake model (tests/e2e) through the example machine:

1. the session start shows the idle list;        5. it writes PLAN.md, fires planned (WORK);
2. the model enters dev with the smllm tool;     6. it fires yield and may stop;
3. it tries to stop and is blocked;              7. the next prompt (a resumed run) clears the
4. it fires planned without PLAN.md (the guard      yield;
   is false: PLAN again);                        8. it fires done (DONE, idle) and stops freely.

The model checks at each step that the text smllm owes the agent reached it (exactly, inside
one string of the request), then acts; the test then checks where each text came from (a tool
result or the client's own context), smllm's audit of the hooks and the store. Needs the pinned
clients (`npm ci --prefix tests/clients`, scripts/test runs it) and Node; without them the tests
fail, saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from e2e import clients, scenario
from e2e.fake_model import FakeModel, Request, split_texts

NAMES = ["claude", "codex", "copilot", "opencode"]


class Played:
    """What one client's session left: the model's requests, smllm's store and audit."""

    def __init__(
        self,
        model: FakeModel,
        box: clients.Sandbox,
        client: clients.Client,
        between: list[dict[str, Any]],
    ) -> None:
        self.model, self.box, self.client = model, box, client
        self.between = between  # the sessions between the two runs
        listed = self.cli(["session", "list", "--json"])
        self.sessions: list[dict[str, Any]] = listed["sessions"]
        self.key = self.sessions[0]["key"] if self.sessions else ""
        self.instances = self.cli(["instance", "list", "--json"])["instances"]
        shown = self.cli(["session", "show", self.key, "--audit", "--json"]) if self.key else {}
        self.audit: list[dict[str, Any]] = shown.get("audit", [])
        self.texts = scenario.Texts().for_key(self.key)

    def cli(self, args: list[str]) -> dict[str, Any]:
        ran = smllm(args, self.box.project, self.box.env)
        assert ran.code == 0, (args, ran.err)
        value: dict[str, Any] = json.loads(ran.out)
        return value

    def request(self, step: int) -> Request:
        """The request that took STEP of the script."""
        return next(r for r in self.model.requests if r.step == step)


def play(name: str, root: Path) -> Played:
    box = clients.sandbox(root)
    with FakeModel(root / "requests") as model:
        client = clients.CLIENT_TYPES[name](box, model.url)
        model.steps = scenario.steps(client.write_plan(scenario.PLAN_TEXT), client.as_stop_reason)
        try:
            installed = smllm(["harness", "install", client.harness], box.project, box.env)
            assert installed.code == 0, installed.err
            client.prepare()
            first = client.run(scenario.FIRST_PROMPT, resume=False)
            assert first.code == 0, first.describe()
            clients.settle(model, client, scenario.FIRST_RUN_STEPS, first)
            between = smllm(["session", "list", "--json"], box.project, box.env)
            second = client.run(scenario.SECOND_PROMPT, resume=True)
            assert second.code == 0, second.describe()
            clients.settle(model, client, scenario.ALL_STEPS, second)
        finally:
            client.close()
        return Played(model, box, client, json.loads(between.out)["sessions"])


@pytest.fixture(scope="module", params=NAMES)
def played(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Played:
    """A client's session, played once for all its checks (a failure fails each of them)."""
    name: str = request.param
    return play(name, tmp_path_factory.mktemp(name))


def test_the_model_saw_every_block(played: Played) -> None:
    p = played
    t = p.texts
    # every main turn took its step in order: no extra turn, so the stops of steps 6 and 8
    # were allowed
    assert [r.step for r in p.model.main_requests()] == list(range(scenario.ALL_STEPS))

    def context(step: int) -> list[str]:
        return split_texts(p.request(step).body)[1]

    def tool_results(step: int) -> list[str]:
        return split_texts(p.request(step).body)[0]

    def has(texts: list[str], text: str) -> bool:
        return any(text in s for s in texts)

    # 1: the session-start context carries the idle list, before any tool call
    assert has(context(0), t["idle"])
    # 2: enter's reply is the tool result
    assert has(tool_results(1), t["entered"])
    # 3: the blocked stop's reason comes back as the client's own message, not a tool result
    blocked = p.client.as_stop_reason(t["blocked"])
    assert has(context(2), blocked)
    assert not has(tool_results(2), blocked)
    # 4: planned with the guard false: PLAN again, visit 2
    assert has(tool_results(3), t["reentered"])
    # 5: planned after PLAN.md exists: WORK
    assert (p.box.project / "PLAN.md").read_text() == scenario.PLAN_TEXT
    assert has(tool_results(5), t["work"])
    # 6: yield
    assert has(tool_results(6), t["yielded"])
    # 7: the resumed conversation: the session start shows where the session is, then the
    # second prompt (which clears the yield: see the audit). OpenCode's second run goes on in
    # the same server session, so no session start runs there: its plugin asks for the
    # session's view again at the user message, and the system text is that view
    assert has(context(7), scenario.FIRST_PROMPT)
    assert has(context(7), scenario.SECOND_PROMPT)
    assert has(context(7), t["resumed"])
    # 8: done: DONE, then idle
    assert has(tool_results(8), t["done"])
    # requests without tools (OpenCode's title request) never carry smllm's text
    assert not [r.number for r in p.model.requests if not r.tools and has(r.strings, "<smllm>")]
    if p.client.name == "opencode":
        # the plugin appends the session's view to the first system message of every main
        # request, asking for it again after each smllm tool call, at its own re-prompt and at
        # a user message: the idle list, PLAN from enter on (the re-prompt after the blocked
        # stop too), PLAN's second visit (the write between changes nothing), WORK through
        # yield and the second run's prompt, and idle after done
        golden = scenario.Texts()
        golden.plan = scenario.golden_outputs()[2].rstrip("\n")  # `session show` in PLAN
        views = golden.for_key(p.key)
        plan, work = views["plan"], t["resumed"]
        plan2 = plan.replace(" · dev › PLAN · ", " · dev › PLAN (visit 2) · ", 1)
        assert plan2 != plan
        shown = [t["idle"], plan, plan, plan2, plan2, work, work, work, t["idle"]]
        for r in p.model.main_requests():
            first = r.body["messages"][0]
            assert first["role"] == "system", r.number
            assert first["content"].endswith("\n\n" + shown[r.step]), r.number


def test_the_store_after_the_session(played: Played) -> None:
    p, name = played, played.client.harness
    # after the first run: in WORK, yielded (so its stop was allowed), no block pending
    assert [(s["yielded"], s["blocks"]) for s in p.between] == [(True, 0)]
    assert p.between[0]["holding"] is not None
    # after the second: its prompt cleared the yield, done took it back to idle
    assert len(p.sessions) == 1
    s = p.sessions[0]
    assert (s["harness"], s["cwd"], s["holding"]) == (name, str(p.box.project), None)
    assert (s["yielded"], s["blocks"]) == (False, 0)
    assert s["hostSession"] == p.client.session_id
    assert [(i["machine"], i["ref"], i["state"]) for i in p.instances] == [("dev", "GH-12", "DONE")]


def test_the_hooks_audit(played: Played) -> None:
    p, name = played, played.client.harness
    got = [audit_line(a) for a in p.audit]
    # one bind, from the session-start hook's payload (the client's session id and folder);
    # one prompt: the second run's. Copilot's prompt hook that fires again on the block's
    # reason, and OpenCode's plugin re-prompting with it, write nothing
    assert got == [
        f"bind {name} {p.client.session_id} {p.box.project}",
        "event enter - → PLAN",
        "block PLAN",
        "event planned PLAN → PLAN",
        "event planned PLAN → WORK",
        "event yield WORK → WORK",
        "prompt cleared yielded=True blocks=0",
        "event done WORK → DONE",
    ], json.dumps(p.audit, indent=1)


def audit_line(a: dict[str, Any]) -> str:
    if a["kind"] == "bind":
        return f"bind {a['harness']} {a['hostSession']} {a['cwd']}"
    if a["kind"] == "event":
        return f"event {a['event']} {a['from'] or '-'} → {a['to']}"
    if a["kind"] == "prompt":  # what the prompt cleared (after it: neither)
        assert (a["yielded"], a["blocks"]) == (False, 0), a
        return f"prompt cleared yielded={a['cleared']['yielded']} blocks={a['cleared']['blocks']}"
    return f"{a['kind']} {a.get('state', '')}"
