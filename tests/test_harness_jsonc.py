"""OpenCode's config with comments and trailing commas (JSONC; cli-and-harnesses.md §6,
"Merges"; issue 20 §5): smllm reads it, edits `mcp.smllm` in its text so that every comment,
comma and space of the user's stays, and the real OpenCode still reads what it wrote.

The edits are checked on exact texts (jsonc.py through jsonfile.edit_json, as install runs
them), then through `smllm harness install opencode` and its plan for an `opencode.jsonc`, then
with OpenCode's own `opencode debug config`, which prints the config it resolved."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from e2e.clients import client_bin

from smllm.harness.install.jsonc import (
    JsoncError,
    comment_count,
    has_comments,
    loads,
    opencode_config_path,
    reads_comments,
)
from smllm.harness.install.jsonfile import (
    Broken,
    drop_entry,
    drop_value,
    dump_json,
    edit_json,
    parse_json,
    put_entry,
    put_value,
)
from smllm.harness.install.parts import Where, parts_of
from smllm.harness.install.plan import make_plan

#: an entry as the tests below write it (install's own comes from parts.py: `want`)
ENTRY = {"type": "local", "command": ["smllm", "mcp"], "enabled": True}
ENTRY_TEXT = """{
      "type": "local",
      "command": [
        "smllm",
        "mcp"
      ],
      "enabled": true
    }"""  # as it goes in at `mcp`'s members' indent of four spaces
MCP = ("mcp",)


def put(text: str, entry: Any = ENTRY) -> str | None:
    """TEXT once smllm's entry is put in `mcp` (the install's edit)."""
    old = parse_json(text, comments=True)
    new = copy.deepcopy(old)
    put_entry(new, MCP, "smllm", entry)
    return checked(text, old, new)


def drop(text: str) -> str | None:
    """TEXT once smllm's entry is taken out (`--without mcp`)."""
    old = parse_json(text, comments=True)
    new = copy.deepcopy(old)
    drop_entry(new, MCP, "smllm")
    return checked(text, old, new)


def checked(text: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    edited = edit_json(text, old, new)
    if edited is not None:
        assert loads(edited) == new  # what OpenCode reads is what the install meant
    return edited


# -- reading -------------------------------------------------------------------------------------


def test_comments_trailing_commas_and_a_bom_are_read() -> None:
    text = (
        "\ufeff// the team's settings\n"
        "{\n"
        '  "url": "http://example.com/*not a comment*/", // a line comment\n'
        '  "path": "a//b", /* a block\n   comment */\n'
        '  "quote": "say \\"hi\\" // still the string",\n'
        '  "list": [1, 2.5, true, null, ],\n'
        '  "nested": {"a": {"b": [],},},\n'
        "}\n"
    )
    assert loads(text) == {
        "url": "http://example.com/*not a comment*/",
        "path": "a//b",
        "quote": 'say "hi" // still the string',
        "list": [1, 2.5, True, None],
        "nested": {"a": {"b": []}},
    }
    assert has_comments(text) is True
    assert has_comments('{"a": "// no", "b": "/* no */"}') is False
    assert loads('{"a": 1, "a": 2}') == {"a": 2}  # as json.loads: the last one counts


NAME = "Expecting property name enclosed in double quotes"
UNTERMINATED = "Unterminated string or a control character in it"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{,}", f"{NAME}: line 1 column 2 (char 1)"),
        ('{\n  "mcp": {,\n}', f"{NAME}: line 2 column 11 (char 12)"),
        ("[1,,2]", "Expecting value: line 1 column 4 (char 3)"),
        ('{"a": 1 /* open', "Unterminated comment: line 1 column 9 (char 8)"),
        ('{"a": 1} x', "Extra data: line 1 column 10 (char 9)"),
        ('{"a" 1}', "Expecting ':' delimiter: line 1 column 6 (char 5)"),
        ('{"a": 1 "b": 2}', "Expecting ',' delimiter: line 1 column 9 (char 8)"),
        ("{'a': 1}", f"{NAME}: line 1 column 2 (char 1)"),
        ('{"a": "\\x"}', "Invalid escape in string: line 1 column 7 (char 6)"),
        ('{"a": "tab\there"}', f"{UNTERMINATED}: line 1 column 7 (char 6)"),
        ('{"a": NaN}', "Expecting value: line 1 column 7 (char 6)"),
        ("", "Expecting value: line 1 column 1 (char 0)"),
    ],
)  # fmt: skip
def test_what_is_not_jsonc_is_refused_saying_where(text: str, error: str) -> None:
    with pytest.raises(JsoncError) as caught:
        loads(text)
    assert str(caught.value) == error


def test_only_a_file_whose_client_reads_comments_may_have_them() -> None:
    text = '{\n  // mine\n  "a": 1,\n}\n'
    assert parse_json(text, comments=True) == {"a": 1}
    with pytest.raises(Broken) as plain:
        parse_json(text)  # .mcp.json, Claude's and Codex's files: JSON only, as before
    assert str(plain.value) == (
        "not JSON: Expecting property name enclosed in double quotes: line 2 column 3 (char 4)"
    )
    with pytest.raises(Broken) as broken:
        parse_json('{\n  "mcp": {,\n}', comments=True)
    assert str(broken.value) == (
        "not JSON, even with comments: Expecting property name enclosed in double quotes: "
        "line 2 column 11 (char 12)"
    )
    with pytest.raises(Broken) as listed:
        parse_json("// a list\n[1,]", comments=True)
    assert str(listed.value) == "must hold a JSON object"
    assert [reads_comments(p) for p in ("/p/opencode.json", "/p/x.jsonc", "/p/.mcp.json")] == [
        True,
        True,
        False,
    ]


# -- editing: mcp.smllm put in and taken out -----------------------------------------------------


def test_plain_json_is_written_as_before() -> None:
    text = '{"theme": "dark",\n "mcp": {}}'
    old = parse_json(text, comments=True)
    new = copy.deepcopy(old)
    put_entry(new, MCP, "smllm", ENTRY)
    written = f'{{\n  "theme": "dark",\n  "mcp": {{\n    "smllm": {ENTRY_TEXT}\n  }}\n}}\n'
    assert edit_json(text, old, new) == written == dump_json(new, text)  # its layout is gone
    assert edit_json(None, {}, {"theme": "dark"}) == '{\n  "theme": "dark"\n}\n'
    dropped = copy.deepcopy(new)
    drop_entry(dropped, MCP, "smllm")
    assert edit_json(dump_json(new, None), new, dropped) == '{\n  "theme": "dark"\n}\n'
    assert edit_json(dump_json({"mcp": {"smllm": ENTRY}}, None), new, {}) is None  # removed


BEFORE = """\
// the team's OpenCode settings
{
  "$schema": "https://opencode.ai/config.json", // keep this
  /* servers: "ours" first */
  "mcp": {
    "docs": {"type": "remote", "url": "https://example.com/mcp//x/*y*/"}, // theirs
  },
  "autoupdate": false,
}
"""

AFTER = f"""\
// the team's OpenCode settings
{{
  "$schema": "https://opencode.ai/config.json", // keep this
  /* servers: "ours" first */
  "mcp": {{
    "docs": {{"type": "remote", "url": "https://example.com/mcp//x/*y*/"}}, // theirs
    "smllm": {ENTRY_TEXT},
  }},
  "autoupdate": false,
}}
"""


def test_the_entry_joins_other_servers_and_every_comment_stays() -> None:
    assert put(BEFORE) == AFTER  # after the last server, with the file's trailing comma
    assert put(AFTER) == AFTER  # already there: the same text
    assert drop(AFTER) == BEFORE  # --without mcp: back to the user's bytes


def test_no_mcp_object_yet() -> None:
    text = '{\n  // nothing but the model\n  "model": "anthropic/claude"\n}\n'
    want = (
        '{\n  // nothing but the model\n  "model": "anthropic/claude",\n'
        f'  "mcp": {{\n    "smllm": {ENTRY_TEXT}\n  }}\n}}\n'
    )
    assert put(text) == want
    assert drop(want) == text  # `mcp`, left empty, goes too


@pytest.mark.parametrize(
    ("mcp", "filled"),
    [
        ("{}", f"{{\n    \"smllm\": {ENTRY_TEXT}\n  }}"),
        ("{ }", f"{{\n    \"smllm\": {ENTRY_TEXT}\n  }}"),
        ("{\n    // none yet\n  }", f"{{\n    // none yet\n    \"smllm\": {ENTRY_TEXT}\n  }}"),
        ("{ /* none */ }", f"{{ /* none */\n    \"smllm\": {ENTRY_TEXT}\n  }}"),
    ],
    ids=["empty", "blank", "a-comment", "an-inline-comment"],
)  # fmt: skip
def test_an_empty_mcp_object(mcp: str, filled: str) -> None:
    text = f'// c\n{{\n  "mcp": {mcp}\n}}\n'
    assert put(text) == f'// c\n{{\n  "mcp": {filled}\n}}\n'


def test_nested_deeper_with_tabs_and_crlf() -> None:
    text = '{\r\n\t"theme": "dark", // dark\r\n\t"mcp": {\r\n\t\t"a": {"enabled": false}\r\n'
    text += "\t}\r\n}\r\n"
    entry = '{\r\n\t\t\t"type": "local",\r\n\t\t\t"command": [\r\n\t\t\t\t"smllm",\r\n'
    entry += '\t\t\t\t"mcp"\r\n\t\t\t],\r\n\t\t\t"enabled": true\r\n\t\t}'
    want = text.replace(
        '"a": {"enabled": false}', f'"a": {{"enabled": false}},\r\n\t\t"smllm": {entry}'
    )
    assert put(text) == want
    assert drop(want) == text


def test_a_bom_and_a_comment_before_the_object_stay() -> None:
    text = '\ufeff/* header */ {"mcp": {"docs": {"enabled": false}}}'
    compact = json.dumps(ENTRY)
    assert (
        put(text)
        == f'\ufeff/* header */ {{"mcp": {{"docs": {{"enabled": false}}, "smllm": {compact}}}}}'
    )
    assert drop(put(text) or "") == text


def test_one_line_with_a_trailing_comma() -> None:
    text = '{"mcp": {"docs": {}, }, } // one line'
    assert put(text) == f'{{"mcp": {{"docs": {{}}, "smllm": {json.dumps(ENTRY)}, }}, }} // one line'


def test_an_edited_entry_is_rewritten_keeping_its_comments() -> None:
    """--force (or a stale path): only the values that differ change."""
    text = """{
  "mcp": {
    "smllm": {
      "type": "local", // smllm's
      "command": ["/old/venv/bin/smllm", "mcp"],
      "enabled": false, /* off for now */
      "mine": 1,
    },
  },
}
"""
    assert (
        put(text)
        == """{
  "mcp": {
    "smllm": {
      "type": "local", // smllm's
      "command": ["smllm", "mcp"],
      "enabled": true, /* off for now */
    },
  },
}
"""
    )


def test_any_entry_value_goes_in() -> None:
    """The entry is data: a key the install adds (say `timeout`), a nested object, a string
    with comment marks; and a changed value of any type replaces the old one."""
    entry = {**ENTRY, "timeout": 600000, "environment": {"A": "x // y /* z */"}}
    text = '{\n  "mcp": {\n    "smllm": {"type": "local"} // old\n  }\n}\n'
    edited = put(text, entry)
    assert edited == (
        '{\n  "mcp": {\n    "smllm": {"type": "local", "command": ["smllm", "mcp"], '
        '"enabled": true, "timeout": 600000, "environment": {"A": "x // y /* z */"}} // old\n'
        "  }\n}\n"
    )
    assert (
        put(text, "a string now") == '{\n  "mcp": {\n    "smllm": "a string now" // old\n  }\n}\n'
    )


def test_removing_keeps_the_comments_around_the_entry() -> None:
    text = """{
  "mcp": {
    "a": 1, // after a
    // about smllm
    "smllm": {"type": "local"}, // smllm's
    "b": 2
  }
}
"""
    assert (
        drop(text)
        == """{
  "mcp": {
    "a": 1, // after a
    // about smllm
    // smllm's
    "b": 2
  }
}
"""
    )
    last = '{\n  "mcp": {\n    "a": 1, // after a\n    "smllm": {}\n  }\n}\n'
    assert drop(last) == '{\n  "mcp": {\n    "a": 1 // after a\n  }\n}\n'
    inline = '{"mcp": {"a": 1, "smllm": {}, "b": 2}, /* c */}'
    assert drop(inline) == '{"mcp": {"a": 1, "b": 2}, /* c */}'
    assert drop('{"mcp": {"a": 1, "smllm": {}}, /* c */}') == '{"mcp": {"a": 1}, /* c */}'


def test_a_file_left_empty_keeps_its_comments_or_goes() -> None:
    assert drop('// only smllm here\n{\n  "mcp": {\n    "smllm": {},\n  },\n}\n') == (
        "// only smllm here\n{}\n"
    )
    assert drop('{\n  "mcp": {"smllm": {},},\n}\n') is None  # nothing of the user's: removed


def test_a_repeated_key_is_edited_where_it_counts() -> None:
    text = '{\n  "mcp": {"smllm": 1}, // first\n  "mcp": {"smllm": 2}, // counts\n}\n'
    assert (
        put(text, 3) == '{\n  "mcp": {"smllm": 1}, // first\n  "mcp": {"smllm": 3}, // counts\n}\n'
    )
    assert drop(text) == "{\n  // first\n  // counts\n}\n"


def test_lists_are_edited_item_by_item() -> None:
    """Other parts' edits (a permission in a list) are generic too."""
    text = '{\n  "allow": [\n    "a", // first\n    "b",\n  ],\n}\n'
    old = parse_json(text, comments=True)
    added = copy.deepcopy(old)
    put_value(added, ("allow",), "c")
    with_c = checked(text, old, added)
    assert with_c == '{\n  "allow": [\n    "a", // first\n    "b",\n    "c",\n  ],\n}\n'
    assert with_c is not None
    dropped = copy.deepcopy(added)
    drop_value(dropped, ("allow",), "a")
    assert checked(with_c, added, dropped) == (
        '{\n  "allow": [\n    // first\n    "b",\n    "c",\n  ],\n}\n'  # the comment stays
    )


def random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.3:
        keys = rng.sample(["a", "b", "x//y", "/*z*/"], rng.randint(0, 3))
        return {key: random_value(rng, depth + 1) for key in keys}
    if depth < 3 and roll < 0.5:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([1, 2.5, True, None, "s", "// c", "/* c */", "é"])


def random_text(rng: random.Random, value: Any, indent: str, newline: str) -> str:
    """VALUE as JSONC laid out at random: one line or one item a line, trailing commas, line
    comments after a comma, block comments in empty containers."""
    if not isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    opening, closing = "{}" if isinstance(value, dict) else "[]"
    inner = indent + "  "
    items = [
        (f"{json.dumps(k)}: " if isinstance(value, dict) else "")
        + random_text(rng, v, inner, newline)
        for k, v in (value.items() if isinstance(value, dict) else enumerate(value))
    ]
    if not items:
        return opening + rng.choice(["", " ", " /* empty */ ", newline + indent]) + closing
    trailing = rng.choice(["", ","])
    if rng.random() < 0.4:
        return opening + ", ".join(items) + trailing + closing
    separators = [rng.choice([",", ", // c"]) + newline + inner for _ in items[1:]]
    body = items[0] + "".join(sep + item for sep, item in zip(separators, items[1:], strict=True))
    return f"{opening}{newline}{inner}{body}{trailing}{newline}{indent}{closing}"


def test_random_layouts_put_then_drop_give_the_text_back() -> None:
    """Seeded layouts of random configs: the put keeps every comment and reads back as meant,
    and the drop gives back the user's bytes."""
    rng = random.Random(20)
    for _ in range(400):
        old = {key: random_value(rng, 1) for key in rng.sample(["a", "b", "c"], rng.randint(0, 3))}
        servers = rng.sample(["a", "b"], rng.randint(1, 2))  # an emptied `mcp` goes: not here
        old["mcp"] = {key: random_value(rng, 2) for key in servers}
        newline = rng.choice(["\n", "\r\n"])
        text = f"// head{newline}{random_text(rng, old, '', newline)}{newline}"
        assert loads(text) == old, text
        edited = put(text)
        assert edited is not None and comment_count(edited) == comment_count(text), edited
        assert drop(edited) == text, edited


# -- which file, and the install ----------------------------------------------------------------


def test_the_config_file_opencode_reads(tmp_path: Path) -> None:
    assert opencode_config_path(str(tmp_path)) == str(tmp_path / "opencode.json")
    (tmp_path / "opencode.jsonc").write_text("{}")
    assert opencode_config_path(str(tmp_path)) == str(tmp_path / "opencode.jsonc")
    (tmp_path / "opencode.json").write_text("{}")
    assert opencode_config_path(str(tmp_path)) == str(tmp_path / "opencode.json")


def want_entry(project: Path) -> Any:
    """The `mcp.smllm` entry a project-scope install writes (parts.py's)."""
    where = Where("project", str(project), str(project), "smllm", {})
    [mcp] = [p for p in parts_of(where, "opencode") if p.name == "mcp"]
    return mcp.want


def entry_text(entry: Any) -> str:
    return json.dumps(entry, indent=2).replace("\n", "\n    ")


def mcp_part(project: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    """The `mcp` part of `smllm harness ARGS --json` for opencode: its path, state, action."""
    ran = smllm(["harness", *args, "opencode", "--json"], project, env)
    assert ran.code == 0, ran.err
    [part] = [p for p in json.loads(ran.out)["parts"] if p["part"] == "mcp"]
    return dict(part)


def test_install_merges_into_a_commented_opencode_json(project: Path, env: dict[str, str]) -> None:
    config = project / "opencode.json"
    config.write_text(BEFORE)
    after = AFTER.replace(ENTRY_TEXT, entry_text(want_entry(project)))
    path = str(config)
    assert mcp_part(project, env, "install") == {
        "part": "mcp",
        "path": path,
        "state": "missing",
        "action": "written",
    }
    assert config.read_text() == after
    stamp = config.stat().st_mtime_ns
    again = mcp_part(project, env, "install")
    assert (again["state"], again["action"]) == ("current", "current")
    assert config.stat().st_mtime_ns == stamp  # a second run writes nothing
    assert mcp_part(project, env, "status") == {"part": "mcp", "path": path, "state": "current"}
    dropped = mcp_part(project, env, "install", "--without", "mcp")
    assert (dropped["state"], dropped["action"]) == ("declined", "removed")
    assert config.read_text() == BEFORE


def test_a_broken_opencode_json_is_still_refused(project: Path, env: dict[str, str]) -> None:
    (project / "opencode.json").write_text('{\n  // c\n  "mcp": {,\n}\n')
    ran = smllm(["harness", "install", "opencode"], project, env)
    assert ran.code == 1
    assert ran.err.splitlines()[0] == (
        "error: can't read opencode.json: not JSON, even with comments: Expecting property name "
        "enclosed in double quotes: line 3 column 11 (char 19); nothing was written"
    )


def jsonc_plan(project: Path, text: str, declined: set[str]) -> str | None:
    """What install writes to the project's `opencode.jsonc` (the file parts.py names when
    it is the only OpenCode config there)."""
    path = str(project / "opencode.jsonc")
    Path(path).write_text(text)
    assert opencode_config_path(str(project)) == path
    where = Where("project", str(project), str(project), "smllm", {})
    mcp = [p for p in parts_of(where, "opencode") if p.name == "mcp"]
    plan = make_plan(mcp, declined, force=False, install=True)
    assert plan.broken == [] and [r.path for r in plan.rows] == [path]
    return plan.writes[path][0]


def test_an_opencode_jsonc_is_planned_in_place(project: Path) -> None:
    text = '{\n  // ours\n  "autoupdate": false\n}\n'
    written = jsonc_plan(project, text, set())
    entry = entry_text(want_entry(project))
    assert written == (
        f'{{\n  // ours\n  "autoupdate": false,\n  "mcp": {{\n    "smllm": {entry}\n  }}\n}}\n'
    )
    assert jsonc_plan(project, written, {"mcp"}) == text


def test_install_writes_an_opencode_jsonc_in_place(project: Path, env: dict[str, str]) -> None:
    jsonc = project / "opencode.jsonc"
    jsonc.write_text('// mine\n{\n  "share": "disabled", // keep\n}\n')
    ran = smllm(["harness", "install", "opencode", "--json"], project, env)
    assert ran.code == 0, ran.err
    rows = {p["part"]: (p["path"], p["action"]) for p in json.loads(ran.out)["parts"]}
    assert rows["mcp"] == (str(jsonc), "written")
    assert not (project / "opencode.json").exists()
    text = jsonc.read_text()
    assert text.startswith('// mine\n{\n  "share": "disabled", // keep\n  "mcp": {')
    again = smllm(["harness", "status", "opencode", "--json"], project, env)
    assert {p["part"]: p["state"] for p in json.loads(again.out)["parts"]}["mcp"] == "current"


# -- the real OpenCode reads what smllm wrote ----------------------------------------------------


def opencode_config(project: Path, tmp_path: Path) -> dict[str, Any]:
    """`opencode debug config` in PROJECT, offline, with a fresh HOME and XDG folders: the
    config OpenCode resolved from the project's files."""
    folders = {
        name: tmp_path / "oc" / name for name in ("home", "config", "state", "cache", "data")
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(folders["home"]),
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(folders["config"]),
        "XDG_STATE_HOME": str(folders["state"]),
        "XDG_CACHE_HOME": str(folders["cache"]),
        "XDG_DATA_HOME": str(folders["data"]),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "npm_config_offline": "true",  # its plugin-package install fails at once offline
    }
    ran = subprocess.run(
        [client_bin("opencode"), "debug", "config"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "not valid JSON" not in ran.stdout + ran.stderr
    resolved: dict[str, Any] = json.loads(ran.stdout)
    return resolved


def test_opencode_reads_the_commented_opencode_json_install_wrote(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    config = project / "opencode.json"
    config.write_text(BEFORE)
    assert mcp_part(project, env, "install")["action"] == "written"
    written = config.read_text()
    assert "// theirs" in written and has_comments(written)
    resolved = opencode_config(project, tmp_path)
    assert resolved["mcp"] == {
        "docs": {"type": "remote", "url": "https://example.com/mcp//x/*y*/"},
        "smllm": want_entry(project),
    }
    assert (resolved["$schema"], resolved["autoupdate"]) == (
        "https://opencode.ai/config.json",
        False,
    )
    assert config.read_text() == written  # OpenCode left the file as smllm wrote it


def test_opencode_reads_the_opencode_jsonc_smllm_planned(project: Path, tmp_path: Path) -> None:
    text = (
        '{\n  "$schema": "https://opencode.ai/config.json",\n'
        '  "share": "disabled", // never\n  "mcp": {\n    /* ours */\n  },\n}\n'
    )
    written = jsonc_plan(project, text, set())
    assert written is not None
    (project / "opencode.jsonc").write_text(written)
    resolved = opencode_config(project, tmp_path)
    assert resolved["mcp"] == {"smllm": want_entry(project)}
    assert resolved["share"] == "disabled"
