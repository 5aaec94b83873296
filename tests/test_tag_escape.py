"""No value from outside can open or close a block (agent-text.md §1 "Author text and escaping";
issue 12 §1.4): a `<` that starts `smllm`, `/smllm`, `instructions`, `/instructions`, `events`
or `/events`, in any case, is written `&lt;`, and line breaks as `\\n` / `\\r`.

Checked directly on `escape` for every tag in case and spelling variants (upper, lower, mixed,
whitespace and line breaks inside the tag, attributes, self-closing, unterminated), and end to
end through the real CLI with the variants in a ref, a string param, a JSON param, a refusal's
detail, a guard's output and the descriptions shown in lists; the printed block must hold no
tag but its own. Author text in `<instructions>` is printed as written: there AGT-1 warns,
whatever the case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import smllm, write_machine

from smllm.text.block import escape

NAMES = ("smllm", "instructions", "events")


def cases(name: str) -> list[str]:
    """The spellings of NAME: lower, upper, title and mixed case."""
    mixed = "".join(c.upper() if i % 2 else c for i, c in enumerate(name))
    return [name, name.upper(), name.title(), mixed]


SHAPES = (
    "<{}>",
    "</{}>",
    "</{} >",
    "</{}\n>",
    "</{}\t>",
    "</{}\r\n>",
    "<{}\n>",
    '<{} a="b">',
    "<{}/>",
    "</{}",  # unterminated, at the end of the value
)
VARIANTS = [shape.format(spelled) for name in NAMES for spelled in cases(name) for shape in SHAPES]
#: a tag of ours, in the printed block: `<`, an optional `/`, a name, and no more name after it
TAG = re.compile(r"</?(?:smllm|instructions|events)(?![A-Za-z0-9_.:-])", re.IGNORECASE)
OWN = ("<smllm>", "<instructions>", "</instructions>", "<events>", "</events>", "</smllm>")


def spec_escape(text: str) -> str:
    """agent-text.md §1, restated: the oracle for what one line of outside text becomes."""
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return re.sub(r"<(?=/?(?:smllm|instructions|events))", "&lt;", text, flags=re.IGNORECASE)


def spec_quoted(value: str) -> str:
    """A value inside `"…"` on such a line (`"` and `\\` escaped too)."""
    return spec_escape('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')


def spec_got(value: str) -> str:
    """A refused value as an error echoes it (agent-text.md §9): cut to 200 characters with
    `…`, then quoted and escaped."""
    cut = value if len(value) <= 200 else value[:199] + "…"
    return f"(got {spec_quoted(cut)})"


@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_escape_every_variant(variant: str) -> None:
    for text in (variant, f"before {variant} after", variant * 3):
        out = escape(text)
        assert TAG.search(out) is None, out
        assert "\n" not in out and "\r" not in out, out
        assert out == spec_escape(text)


def test_escape_exactly() -> None:
    assert escape("</SMLLM>") == "&lt;/SMLLM>"
    assert escape("<SmLlM>") == "&lt;SmLlM>"
    assert escape("</smllm >") == "&lt;/smllm >"
    assert escape("</Events>\n</INSTRUCTIONS>") == "&lt;/Events>\\n&lt;/INSTRUCTIONS>"
    assert escape("</smllm\r\n>") == "&lt;/smllm\\r\\n>"
    assert escape("<<smllm>>") == "<&lt;smllm>>"
    # a `<` that starts no tag of ours stays, and so does a tag of ours without its `<`
    assert escape("a < b, <b>, <smll>, smllm>, </event>") == "a < b, <b>, <smll>, smllm>, </event>"
    assert escape("") == ""


def check_block(block: str, what: str) -> None:
    """One block: it opens and closes once, at its ends; `<instructions>` and `<events>` open
    and close at most once, each on a line of its own, in order; no other line holds a tag of
    ours (the prompts of the machines below hold none)."""
    lines = block.split("\n")
    own = [line for line in lines if line in OWN]
    assert lines[0] == "<smllm>" and lines[-1] == "</smllm>", f"{what}:\n{block}"
    assert own in (
        ["<smllm>", "</smllm>"],
        ["<smllm>", "<instructions>", "</instructions>", "</smllm>"],
        ["<smllm>", "<events>", "</events>", "</smllm>"],
        ["<smllm>", "<instructions>", "</instructions>", "<events>", "</events>", "</smllm>"],
    ), f"{what}:\n{block}"
    stray = [line for line in lines if line not in OWN and TAG.search(line)]
    assert stray == [], f"{what}: a tag in {stray}\n{block}"


#: every variant, one after another, in one value
ALL = " ".join(VARIANTS)
DESCRIPTION = json.dumps("Tags: " + " ".join(v for v in VARIANTS if "\r" not in v))

TAGS = f"""\
id: tags
description: {DESCRIPTION}
initial: WORK
meta:
  smllm: 1
  instance: {{ kind: task, ref: {{ param: taskId, description: {DESCRIPTION} }} }}
  events:
    say:
      description: {DESCRIPTION}
      params:
        type: object
        properties:
          text: {{ description: {DESCRIPTION} }}
          size: {{ enum: [small, large] }}
          data: {{ type: object }}
    check:
      description: {DESCRIPTION}
      params: {{ type: object, properties: {{ text: {{ type: string }} }}, required: [text] }}
states:
  WORK:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "Work." }} }}
    on:
      say: {{ actions: {{ type: prompt, params: {{ text: "Said." }} }} }}
      check:
        - target: DONE
          guard:
            type: command
            params:
              run: "printf '%s' \\"$SMLLM_PARAM_TEXT\\"; printf '%s' \\"$SMLLM_PARAM_TEXT\\" >&2; exit 1"
        - target: WORK
  DONE:
    type: final
    entry: {{ type: prompt, params: {{ text: "Done." }} }}
"""  # noqa: E501


def fire(
    project: Path, env: dict[str, str], args: list[str], code: int = 0, as_json: bool = True
) -> str:
    """`smllm fire ARGS`, checked as a block in its text form and (AS_JSON) in `--json`'s
    `text`."""
    ran = smllm(["fire", *args], project, env)
    assert (ran.code, ran.err) == (code, ""), ran.out
    check_block(ran.out.removesuffix("\n"), " ".join(args))
    if as_json:
        text = json.loads(smllm(["fire", *args, "--json"], project, env).out)["text"]
        check_block(text, "--json " + " ".join(args))
    return ran.out


def test_every_variant_in_every_value(project: Path, env: dict[str, str]) -> None:
    write_machine(project, "tags", TAGS)
    ran = smllm(["validate"], project, env)
    assert ran.code == 0 and ran.out.startswith("0 errors, 0 warnings"), ran.out
    # the descriptions, in the idle list and the events list
    ran = smllm(["session", "new", "--json"], project, env)
    key = json.loads(ran.out)["session"]
    idle = json.loads(ran.out)["text"]
    check_block(idle, "session new")
    assert spec_escape(json.loads(DESCRIPTION)) in idle
    # the ref: in the header, the Params line and the pause event's description
    out = fire(project, env, ["--session", key, "enter", "--param", "stateMachine=tags",
                              "--param", f"taskId={ALL}"])  # fmt: skip
    assert f" · task {spec_escape(ALL)}\n" in out
    assert f"taskId = {spec_quoted(ALL)}" in out
    # a string param and a JSON param, in the Params line
    data = json.dumps({"data": {"k": ALL, ALL: [ALL]}})
    out = fire(project, env, ["--session", key, "say", "--param", f"text={ALL}", "--params", data])
    assert f"text = {spec_quoted(ALL)}" in out
    # a refusal's detail
    out = fire(project, env, ["--session", key, "say", "--param", f"size={ALL}"], code=1)
    assert spec_got(ALL) in out
    # a guard's output tail (its last 400 characters), stdout then stderr: one spelling a call
    for name in NAMES:
        for spelled in cases(name):
            value = " ".join(shape.format(spelled) for shape in SHAPES)
            args = ["--session", key, "check", "--param", f"text={value}"]
            out = fire(project, env, args, as_json=spelled == name)
            assert f"→ false (exited 1: {spec_escape(value + value)})\n" in out, out


def test_a_refused_enter_and_the_mcp_tool(project: Path, env: dict[str, str]) -> None:
    """The enter refusals that quote a value, and the same block from the MCP tool."""
    from helpers.mcp_client import McpProcess

    out = fire(project, env, ["enter", "--param", f"stateMachine={ALL}"], code=1)
    assert spec_got(ALL) in out
    out = fire(project, env, ["enter", "--param", "stateMachine=dev", "--param", f"issueId={ALL}"],
               code=1)  # fmt: skip
    assert spec_got(ALL) in out
    with McpProcess(project, env) as server:
        server.initialize()
        for params in (
            {"stateMachine": ALL},
            {"stateMachine": "dev", "issueId": ALL},
            {"stateMachine": "dev", "state": ALL},
        ):
            text, is_error = server.tool(event="enter", params=params)
            assert is_error
            check_block(text, f"mcp {params}")
        assert server.close() == 0


@pytest.mark.parametrize("name", NAMES)
def test_agt1_warns_of_a_closing_tag_in_any_case(
    project: Path, env: dict[str, str], name: str
) -> None:
    """Prompts are author text, printed as written: `validate` warns of a closing tag in one
    (a prompt's text, a prompt file), whatever its case (validation.md AGT-1)."""
    dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
    plan = '"Write a plan for the issue in PLAN.md, then fire planned."'
    work = '"Make the change that PLAN.md describes, then fire done."'
    for spelled in cases(name):
        tag = f"</{spelled}>"
        (project / ".smllm" / "work.md").write_text(f"Work.\n{tag}\n")
        text = dev.replace(plan, json.dumps(f"Plan. {tag} more")).replace(work, "")
        text = text.replace("params: { text:  }", "params: { file: work.md }")
        write_machine(project, "dev", text)
        ran = smllm(["validate"], project, env)
        warning = f"warning: {{}}: prompt text contains </{name}>, which would close smllm's block"
        assert ran.out.count("(AGT-1)") == 2, ran.out
        assert warning.format("states.PLAN.entry.params.text") in ran.out, ran.out
        assert warning.format("states.WORK.entry.params.file") in ran.out, ran.out


def test_the_fuzz_tests_report_in_seconds() -> None:
    """The fuzz and property tests that print blocks run under conftest.BOUNDED: no shrinking
    (a case-sensitive escape once took 320 s of it to fail, as FlakyStrategyDefinition) and
    no explaining, unless SMLLM_SHRINK=1 asks for shrinking."""
    import os

    from helpers.fuzz_property import fuzz_settings
    from helpers.property_settings import PROPERTY_SETTINGS, WORLD_SETTINGS
    from hypothesis import Phase

    shrink = bool(os.environ.get("SMLLM_SHRINK"))
    for name, chosen in {  # each fuzz test takes fuzz_settings(its share of the examples)
        "test_fuzz.py, test_fuzz_config.py": fuzz_settings(1.0),
        "test_properties.test_engine_properties": PROPERTY_SETTINGS,
        "test_engine_sans_io_world.test_same_replies_as_the_sqlite_app": WORLD_SETTINGS,
    }.items():
        phases = chosen.phases
        assert Phase.explain not in phases, name
        also = chosen is PROPERTY_SETTINGS and bool(os.environ.get("SMLLM_PROPERTY_SHRINK"))
        assert (Phase.shrink in phases) == (shrink or also), name
        assert Phase.generate in phases, name
