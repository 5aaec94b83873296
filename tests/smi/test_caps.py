"""Capabilities, ACT checks, OBS blocks and the ledger (smllm.smi.caps)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smllm.smi.caps import (
    MAX_ACT_CHARS,
    MAX_DEPTH,
    REFUSAL_TYPES,
    Action,
    Admission,
    Capabilities,
    Ledger,
    Refusal,
    SessionInfo,
    answer_acts,
    check_act,
    obs_block,
    obs_for,
    parse_act,
)
from smllm.smi.stream import Block, TokenRun, canonical_json
from smllm.smi.tokens import Kind

BASH = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "timeout": {"type": "integer", "minimum": 1}},
    "required": ["command"],
    "additionalProperties": False,
}
READ = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
CODING = Capabilities.from_value(
    {
        "tools": [
            {"name": "bash", "parameters": BASH, "description": "Run a command."},
            {"name": "read_file", "parameters": READ},
        ]
    }
)
ROBOT = Capabilities.from_value({"actions": ["navigate", "arm_trajectory", "gripper", "speak"]})


def act(value: Any) -> Block:
    return Block.of("act", value if isinstance(value, str) else canonical_json(value))


def tool_call(act_id: Any = "a1", name: str = "bash", **arguments: Any) -> Block:
    return act({"id": act_id, "type": "tool", "name": name, "arguments": arguments})


def parsed(block: Block, **kwargs: Any) -> Action:
    result = parse_act(block, **kwargs)
    assert isinstance(result, Action), result
    return result


def refused(block: Block, **kwargs: Any) -> Refusal:
    result = parse_act(block, **kwargs)
    assert isinstance(result, Refusal), result
    return result


# -- capabilities -----------------------------------------------------------------------------


def test_caps_blocks_of_one_transmission_declare_together() -> None:
    caps = Capabilities.from_payloads(
        ['{"tools":[{"name":"a"}],"mode":1}', '{"tools":[{"name":"b"}],"actions":["go"],"mode":2}']
    )
    assert ([t.name for t in caps.tools], caps.actions, caps.other) == (
        ["a", "b"],
        ("go",),
        {"mode": 2},
    )
    with pytest.raises(ValueError, match="caps: "):  # each block read as strictly as one alone
        Capabilities.from_payloads(['{"tools":[]}', '{"tools":[],"tools":[]}'])
    with pytest.raises(ValueError, match="caps must be a JSON object"):
        Capabilities.from_payloads(['{"tools":[]}', "[]"])
    with pytest.raises(ValueError, match=r"tool names must be unique \(a repeated\)"):
        Capabilities.from_payloads(['{"tools":[{"name":"a"}]}', '{"tools":[{"name":"a"}]}'])


def test_the_seeds_caps_payloads() -> None:
    caps = Capabilities.from_payload(
        '{"tools":[{"name":"read_file","parameters":{"type":"object"}},'
        '{"name":"bash","parameters":{"type":"object"},"description":"sh"}]}'
    )
    assert [t.name for t in caps.tools] == ["read_file", "bash"]
    assert caps.tool("bash") is not None and caps.tool("bash").description == "sh"  # type: ignore[union-attr]
    assert caps.tool("edit_file") is None
    assert caps.actions == ()
    assert ROBOT.actions == ("navigate", "arm_trajectory", "gripper", "speak")


def test_unknown_keys_are_kept_and_the_value_round_trips() -> None:
    value = {
        "tools": [{"name": "t", "parameters": {"type": "object"}, "x-cost": 3}],
        "actions": ["speak"],
        "realtime": {"hz": 10},
    }
    caps = Capabilities.from_value(value)
    assert caps.other == {"realtime": {"hz": 10}}
    assert caps.tools[0].other == {"x-cost": 3}
    assert caps.to_value() == value
    assert Capabilities.from_value(caps.to_value()) == caps


def test_a_tool_without_parameters_takes_any_object() -> None:
    caps = Capabilities.from_value({"tools": [{"name": "now"}]})
    assert check_act(parsed(tool_call(name="now")), caps, set()) is None
    assert check_act(parsed(tool_call(name="now", x=1)), caps, set()) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "must be a JSON object"),
        ({"tools": {}}, "caps.tools must be a list"),
        ({"tools": ["bash"]}, r"caps.tools\[0\] must be an object"),
        ({"tools": [{"parameters": {}}]}, "non-empty string name"),
        ({"tools": [{"name": ""}]}, "non-empty string name"),
        ({"tools": [{"name": "a"}, {"name": "a"}]}, r"unique \(a repeated\)"),
        ({"tools": [{"name": "a", "parameters": []}]}, "must be a JSON Schema object"),
        ({"tools": [{"name": "a", "parameters": {"type": 5}}]}, r"not a valid JSON Schema: \$"),
        ({"tools": [{"name": "a", "parameters": {"minimum": "x"}}]}, "not a valid JSON Schema"),
        ({"tools": [{"name": "a", "description": 3}]}, "description must be a string"),
        ({"actions": "speak"}, "caps.actions must be a list"),
        ({"actions": ["speak", 3]}, "non-empty names"),
        ({"actions": ["speak", "speak"]}, "action names must be unique"),
    ],
)
def test_bad_caps_are_refused(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Capabilities.from_value(value)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{", "not JSON"),
        ('{"actions":[],"actions":["x"]}', "appears twice"),
        ('{"tools":[],"n":NaN}', "NaN is not JSON"),
        ("[" * 10000 + "]" * 10000, "nested deeper"),
    ],
)
def test_a_caps_payload_is_read_strictly(payload: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Capabilities.from_payload(payload)


# -- parse_act --------------------------------------------------------------------------------


def test_a_tool_call_is_read() -> None:
    block = tool_call(command="git status")
    assert parsed(block) == Action("a1", "tool", "bash", {"command": "git status"}, block)


def test_openai_style_string_arguments_are_parsed() -> None:
    block = act({"id": "a1", "type": "tool", "name": "bash", "arguments": '{"command":"ls"}'})
    assert parsed(block).arguments == {"command": "ls"}


@pytest.mark.parametrize("arguments", ['{"command":', "ls -la", '{"a":1,"a":2}', '{"n":NaN}'])
def test_bad_string_arguments_are_invalid_arguments(arguments: str) -> None:
    block = act({"id": "a7", "type": "tool", "name": "bash", "arguments": arguments})
    refusal = refused(block)
    assert (refusal.type, refusal.action_id) == ("invalid_arguments", "a7")


def test_missing_arguments_are_an_empty_object() -> None:
    assert parsed(act({"id": "a1", "type": "action", "name": "speak"})).arguments == {}


@pytest.mark.parametrize(
    "payload",
    [
        [TokenRun((5, 6, 7), "action")],
        ["approach and grasp"],
        ["[0.1, 0.2, 0.3]"],
        ["42"],
        ["text ", TokenRun((1,)), " {"],
    ],
)
def test_anything_but_a_json_object_is_a_raw_action(payload: list[Any]) -> None:
    block = Block.of("act", payload)
    calls = []

    def raw_id() -> str:
        calls.append(1)
        return "raw-9"

    assert parsed(block, raw_id=raw_id) == Action("raw-9", "raw", None, None, block)
    assert calls == [1]


def test_raw_ids_are_asked_for_only_for_raw_actions() -> None:
    def raw_id() -> str:
        raise AssertionError("asked for a raw id")

    parsed(tool_call(), raw_id=raw_id)
    refused(act("{"), raw_id=raw_id)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"id":"a1","type":"tool"', "not a valid JSON object"),
        ('  {"id":"a1"} trailing', "not a valid JSON object"),
        ('{"id":"a1","id":"a2","type":"tool","name":"bash"}', "'id' appears twice"),
        ('{"id":"a1","type":"tool","name":"bash","arguments":{"x":NaN}}', "NaN is not JSON"),
        ('{"id":"a1","type":"tool","name":"bash","arguments":{"x":-Infinity}}', "Infinity"),
        ('{"id":5,"type":"tool","name":"bash"}', "id must be a string, not a number"),
        ('{"id":["a"],"type":"tool","name":"bash"}', "id must be a string, not a list"),
        ('{"id":true,"type":"tool","name":"bash"}', "not a boolean"),
        ('{"id":"a1","type":"tool","name":"bash","args":{}}', "unknown ACT keys: 'args'"),
        ('{"id":"a1","type":"raw","name":"bash"}', 'must be "tool" or "action"'),
        ('{"id":"a1","name":"bash"}', 'must be "tool" or "action", not None'),
        ('{"id":"a1","type":"tool","name":""}', "non-empty string name"),
        ('{"id":"a1","type":"tool","name":{"x":1}}', "non-empty string name"),
        ('{"id":"\\ud800","type":"tool","name":"bash"}', "lone surrogate"),
        ('{"id":"a1","type":"tool","name":"bash","arguments":{"n":1' + "0" * 5000 + "}}", "not"),
    ],
)
def test_malformed_acts_are_refused(payload: str, message: str) -> None:
    refusal = refused(act(payload))
    assert refusal.type == "malformed_action"
    assert message in refusal.message


def test_deep_nesting_is_refused_at_the_limit_and_far_beyond() -> None:
    def nested(depth: int) -> str:
        inner = "[" * (depth - 2) + "]" * (depth - 2)
        return '{"id":"a1","type":"tool","name":"bash","arguments":{"x":' + inner + "}}"

    assert isinstance(parse_act(act(nested(MAX_DEPTH))), Action)
    assert "nested deeper" in refused(act(nested(MAX_DEPTH + 1))).message
    assert "nested deeper" in refused(act(nested(100_000))).message


def test_a_huge_payload_is_refused_unread() -> None:
    huge = '{"id":"a1","type":"tool","name":"bash","arguments":{"command":"' + "x" * MAX_ACT_CHARS
    refusal = refused(act(huge + '"}}'))
    assert refusal.type == "malformed_action"
    assert (
        refusal.message == f"an ACT payload of {len(huge) + 3} characters (at most {MAX_ACT_CHARS})"
    )
    assert refused(act("x" * 101), max_chars=100).message.startswith("an ACT payload of 101")
    assert refused(Block.of("act", TokenRun(tuple(range(101)))), max_chars=100)
    assert isinstance(parse_act(act("x" * 100), max_chars=100), Action)


def test_parse_act_reads_act_blocks_only() -> None:
    with pytest.raises(ValueError, match="not out"):
        parse_act(Block.of("out", "{}"))


@settings(max_examples=200, deadline=None, database=None)
@given(st.one_of(st.text(max_size=60), st.text(max_size=60).map(lambda t: "{" + t)))
def test_parse_act_never_raises(text: str) -> None:
    result = parse_act(Block.of("act", text))
    assert isinstance(result, Action | Refusal)
    if isinstance(result, Refusal):
        assert result.type in REFUSAL_TYPES


# -- check_act: every refusal, in order ---------------------------------------------------------


def test_a_valid_tool_call_passes() -> None:
    assert check_act(parsed(tool_call(command="ls", timeout=5)), CODING, {"a0"}) is None


def test_missing_and_empty_ids() -> None:
    block = act({"type": "tool", "name": "bash", "arguments": {"command": "ls"}})
    refusal = check_act(parsed(block), CODING, set())
    assert refusal == Refusal("missing_id", "the ACT has no id", None)
    empty = parsed(tool_call(act_id="", command="ls"))
    assert check_act(empty, CODING, set()).type == "missing_id"  # type: ignore[union-attr]


def test_a_duplicate_id() -> None:
    refusal = check_act(parsed(tool_call(command="ls")), CODING, {"a1"})
    assert refusal is not None and refusal.type == "duplicate_id" and refusal.action_id == "a1"


def test_an_undeclared_tool_or_action() -> None:
    refusal = check_act(parsed(tool_call(name="rm_rf")), CODING, set())
    assert refusal is not None and refusal.type == "unknown_capability"
    assert "rm_rf" in refusal.message
    embodied = act({"id": "m1", "type": "action", "name": "fly"})
    assert check_act(parsed(embodied), ROBOT, set()).type == "unknown_capability"  # type: ignore[union-attr]
    # a tool name is not an action name, nor the reverse
    assert check_act(parsed(tool_call(name="speak")), ROBOT, set()) is not None
    as_action = act({"id": "m1", "type": "action", "name": "bash"})
    assert check_act(parsed(as_action), CODING, set()).type == "unknown_capability"  # type: ignore[union-attr]


def test_a_declared_embodied_action_takes_any_arguments() -> None:
    block = act({"id": "m1", "type": "action", "name": "arm_trajectory", "arguments": [0.1, 0.2]})
    assert check_act(parsed(block), ROBOT, set()) is None


def test_a_raw_action_needs_declared_actions() -> None:
    raw = parsed(Block.of("act", TokenRun((1, 2))), raw_id="raw-1")
    assert check_act(raw, ROBOT, set()) is None
    refusal = check_act(raw, CODING, set())
    assert refusal is not None and refusal.type == "unknown_capability"
    assert "declares no actions" in refusal.message


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [(["ls"], "a list"), (None, "null"), ('"ls"', "a string"), (3, "a number")],
)
def test_tool_arguments_must_be_an_object(arguments: Any, kind: str) -> None:
    block = act({"id": "a1", "type": "tool", "name": "bash", "arguments": arguments})
    refusal = check_act(parsed(block), CODING, set())
    assert refusal is not None and refusal.type == "invalid_arguments"
    assert refusal.message == f"a tool's arguments are an object, not {kind}"


def test_caps_are_a_copy_of_the_value() -> None:
    value = {"tools": [{"name": "t", "parameters": {"type": "object"}}]}
    caps = Capabilities.from_value(value)
    value["tools"][0]["parameters"]["type"] = "string"  # type: ignore[index]
    assert caps.tools[0].parameters == {"type": "object"}


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({}, "$: 'command' is a required property"),
        ({"command": 5}, "$.command: 5 is not of type 'string'"),
        ({"command": "ls", "timeout": 0}, "$.timeout: 0 is less than the minimum of 1"),
        ({"command": "ls", "sudo": True}, "Additional properties are not allowed"),
    ],
)
def test_schema_violations_name_the_json_path(arguments: dict[str, Any], found: str) -> None:
    refusal = check_act(parsed(tool_call(**arguments)), CODING, set())
    assert refusal is not None and refusal.type == "schema_violation"
    assert found in refusal.message
    assert refusal.message.startswith("bash: ")


def test_a_schema_violation_message_stays_short() -> None:
    refusal = check_act(parsed(tool_call(command=["x" * 10_000] * 50)), CODING, set())
    assert refusal is not None and refusal.type == "schema_violation"
    assert len(refusal.message) < 1000


def test_a_schema_with_a_remote_ref_is_never_fetched() -> None:
    caps = Capabilities.from_value(
        {"tools": [{"name": "t", "parameters": {"$ref": "https://example.invalid/s.json"}}]}
    )
    refusal = check_act(parsed(tool_call(name="t")), caps, set())
    assert refusal is not None and refusal.type == "schema_violation"
    assert "could not be applied" in refusal.message


def test_the_policy_has_the_last_say() -> None:
    calls: list[Action] = []

    def deny_git(action: Action, session: SessionInfo) -> Refusal | None:
        calls.append(action)
        if "git" in action.arguments.get("command", ""):
            return Refusal("permission_denied", "no git here")
        return None

    allowed = parsed(tool_call(command="ls"))
    assert check_act(allowed, CODING, set(), deny_git) is None
    refusal = check_act(parsed(tool_call(command="git push")), CODING, set(), deny_git)
    assert refusal == Refusal("permission_denied", "no git here", "a1")
    # a call that fails an earlier check never reaches the policy
    calls.clear()
    check_act(parsed(tool_call(command=5)), CODING, set(), deny_git)
    check_act(parsed(tool_call(name="nope")), CODING, set(), deny_git)
    check_act(parsed(tool_call(command="ls")), CODING, {"a1"}, deny_git)
    assert calls == []


def test_a_broken_policy_denies() -> None:
    def broken(action: Action, session: SessionInfo) -> Refusal | None:
        raise RuntimeError("boom")

    def wrong(action: Action, session: SessionInfo) -> Any:
        return True

    for policy in (broken, wrong):
        refusal = check_act(parsed(tool_call(command="ls")), CODING, set(), policy)
        assert refusal is not None and refusal.type == "policy_denied"


def test_checks_come_in_order() -> None:
    """An action wrong in every way gets the first refusal of the order."""
    action = Action("a1", "tool", "nope", ["x"], Block.of("act", "{}"))
    assert check_act(action, CODING, {"a1"}).type == "duplicate_id"  # type: ignore[union-attr]
    assert check_act(action, CODING, set()).type == "unknown_capability"  # type: ignore[union-attr]
    bad = Action("a1", "teleport", "nope", ["x"], Block.of("act", "{}"))
    assert check_act(bad, CODING, {"a1"}).type == "malformed_action"  # type: ignore[union-attr]
    nameless = Action(None, "tool", None, {}, Block.of("act", "{}"))
    assert check_act(nameless, CODING, set()).type == "malformed_action"  # type: ignore[union-attr]


# -- OBS ---------------------------------------------------------------------------------------


def test_obs_blocks_are_exactly_the_seeds_forms() -> None:
    assert obs_block("a1", True, "42 tests passed").parts == (
        '{"caused_by":"a1","ok":true,"content":"42 tests passed"}',
    )
    assert obs_block("a3", True).parts == ('{"caused_by":"a3","ok":true}',)
    assert obs_block("a3", True, None).parts == ('{"caused_by":"a3","ok":true,"content":null}',)
    error = {"type": "permission_denied", "message": "Access denied"}
    assert obs_block("a1", False, error=error).parts == (
        '{"caused_by":"a1","ok":false,"error":{"type":"permission_denied",'
        '"message":"Access denied"}}',
    )
    refusal = Refusal("schema_violation", "bash: $: 'command' is a required property")
    block = obs_block("a2", False, error=refusal)
    assert block.kind is Kind.OBS
    assert json.loads(block.text)["error"] == refusal.error()
    assert obs_for(parsed(tool_call()), True, {"n": 1}) == obs_block("a1", True, {"n": 1})


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("", True), {}, "caused by"),
        ((5, True), {}, "caused by"),
        (("a1", True), {"error": {"type": "x", "message": "y"}}, "has no error"),
        (("a1", False), {}, "needs an error"),
        (("a1", False), {"content": "x", "error": {"type": "x", "message": "y"}}, "not content"),
        (("a1", False), {"error": {"type": "x"}}, "needs an error"),
        (("a1", False), {"error": {"type": "x", "message": 3}}, "needs an error"),
        (("a1", "yes"), {}, "true or false"),
        (("a1", True), {"content": float("nan")}, "not JSON"),
        (("a1", True), {"content": {1, 2}}, "not JSON"),
    ],
)
def test_obs_block_misuse(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        obs_block(*args, **kwargs)


def test_obs_for_a_raw_action_without_id_is_misuse() -> None:
    with pytest.raises(ValueError, match="no id"):
        obs_for(Action(None, "raw", None, None, Block.of("act", "x")), True)


# -- the ledger ---------------------------------------------------------------------------------


def test_each_act_is_answered_exactly_once() -> None:
    ledger = Ledger()
    ledger.issue("a1")
    ledger.issue("a2")
    assert ledger.pending() == ("a1", "a2")
    ledger.answer("a2")
    assert ledger.pending() == ("a1",)
    with pytest.raises(ValueError, match="second OBS"):
        ledger.answer("a2")
    with pytest.raises(ValueError, match="no ACT of this session"):
        ledger.answer("a9")
    with pytest.raises(ValueError, match="already issued"):
        ledger.issue("a1")
    with pytest.raises(ValueError, match="non-empty"):
        ledger.issue("")
    assert "a1" in ledger.seen


def test_raw_ids_skip_ids_the_model_used() -> None:
    ledger = Ledger()
    ledger.issue("raw-1")
    assert ledger.next_raw_id() == "raw-2"
    assert ledger.next_raw_id() == "raw-3"


def test_admit_gives_every_act_an_id_to_answer() -> None:
    ledger = Ledger()
    first = ledger.admit(tool_call(command="ls"), CODING)
    assert first == Admission("a1", parsed(tool_call(command="ls")), None)
    assert first.allowed
    # the model reuses a1: refused, answered under a runtime id
    again = ledger.admit(tool_call(command="pwd"), CODING)
    assert again.refusal is not None and again.refusal.type == "duplicate_id"
    assert again.id == "raw-1"
    # unreadable, no id at all
    broken = ledger.admit(act("{"), CODING)
    assert (broken.id, broken.action, broken.refusal.type) == ("raw-2", None, "malformed_action")  # type: ignore[union-attr]
    # readable but refused: its own id is used and spent
    unknown = ledger.admit(tool_call(act_id="a5", name="nope"), CODING)
    assert unknown.id == "a5" and not unknown.allowed
    # bad string arguments: the id was read
    bad_args = act({"id": "a6", "type": "tool", "name": "bash", "arguments": "{"})
    assert ledger.admit(bad_args, CODING).id == "a6"
    # a raw action gets a runtime id
    assert ledger.admit(Block.of("act", TokenRun((1,))), ROBOT).id == "raw-3"
    assert ledger.pending() == ("a1", "raw-1", "raw-2", "a5", "a6", "raw-3")


class Spy:
    def __init__(self) -> None:
        self.ran: list[Action] = []

    def __call__(self, action: Action, session: SessionInfo) -> tuple[bool, Any]:
        self.ran.append(action)
        if action.name == "read_file" and action.arguments["path"] == "missing":
            return False, Refusal("not_found", "no such file")
        if action.name == "read_file" and action.arguments["path"] == "crash":
            raise OSError("disk on fire")
        return True, f"ran {action.id}"


def test_refused_acts_never_reach_the_runner() -> None:
    blocks = [
        tool_call("a1", command="ls"),
        tool_call("a1", command="rm -rf /"),  # duplicate
        tool_call("a2", name="sudo"),  # undeclared
        tool_call("a3", command=5),  # schema
        act('{"id":"a4","type":"tool","name":"bash","arguments":{"command":"x","command":"y"}}'),
        act({"type": "tool", "name": "bash", "arguments": {"command": "ls"}}),  # no id
        tool_call("a5", name="read_file", path="missing"),
        tool_call("a6", name="read_file", path="crash"),
        tool_call("a7", command="git push"),  # policy
        Block.of("act", TokenRun((7, 8))),  # raw without declared actions
    ]

    def policy(action: Action, session: SessionInfo) -> Refusal | None:
        return Refusal("policy_denied", "no pushing") if "push" in str(action.arguments) else None

    spy, ledger = Spy(), Ledger()
    answers = answer_acts(blocks, CODING, ledger, spy, policy)
    assert [a.id for a in spy.ran] == ["a1", "a5", "a6"]
    values = [json.loads(b.text) for b in answers]
    assert [(v["caused_by"], v["ok"], v.get("error", {}).get("type")) for v in values] == [
        ("a1", True, None),
        ("raw-1", False, "duplicate_id"),
        ("a2", False, "unknown_capability"),
        ("a3", False, "schema_violation"),
        ("raw-2", False, "malformed_action"),
        ("raw-3", False, "missing_id"),
        ("a5", False, "not_found"),
        ("a6", False, "runtime_error"),
        ("a7", False, "policy_denied"),
        ("raw-4", False, "unknown_capability"),
    ]
    assert values[0]["content"] == "ran a1"
    assert values[7]["error"]["message"] == "OSError: disk on fire"
    assert ledger.pending() == ()
    assert all(b.kind is Kind.OBS for b in answers)


ACT_BLOCKS = st.one_of(
    st.builds(
        lambda i, name, command: tool_call(i, name, command=command),
        st.sampled_from(["a1", "a2", "a3", "raw-1", ""]),
        st.sampled_from(["bash", "read_file", "nope"]),
        st.one_of(st.text(max_size=5), st.integers()),
    ),
    st.text(max_size=20).map(lambda t: Block.of("act", t)),
    st.lists(st.integers(0, 9), min_size=1, max_size=3).map(
        lambda ids: Block.of("act", TokenRun(tuple(ids)))
    ),
    st.sampled_from(['{"id":"a1"', '{"id":1}', '{"id":"z","type":"action","name":"speak"}']).map(
        act
    ),
)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(ACT_BLOCKS, max_size=8), st.booleans())
def test_exactly_one_obs_per_act(blocks: list[Block], embodied: bool) -> None:
    caps = Capabilities.from_value(
        {"tools": CODING.to_value()["tools"], "actions": ["speak"] if embodied else []}
    )
    spy, ledger = Spy(), Ledger()
    answers = answer_acts(blocks, caps, ledger, spy)
    causes = [json.loads(b.text)["caused_by"] for b in answers]
    assert len(answers) == len(blocks)
    assert len(set(causes)) == len(causes)
    assert ledger.pending() == ()
    ran = {a.id for a in spy.ran}
    assert len(ran) == len(spy.ran)
    for value in map(json.loads, (b.text for b in answers)):
        assert value["ok"] is (value["caused_by"] in ran)
        assert ("error" in value) is not value["ok"]
    for action in spy.ran:
        assert check_act(action, caps, set()) is None
