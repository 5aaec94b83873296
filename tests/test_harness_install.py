"""`smllm harness install|status` (cli-and-harnesses.md §6): the files each harness gets in each
scope (golden files, the smllm path written as SMLLM), merges that keep every user entry, a
second run that writes nothing, hand-edited parts, --force, declined parts, files that don't
parse, Claude's target rule, Claude's user-scope `claude mcp`, and the repo's Claude plugin."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Ran, smllm

from smllm import __version__ as smllm_version
from smllm.errors import SmllmError
from smllm.harness.install.command import smllm_executable
from smllm.harness.install.jsonfile import is_own_command
from smllm.harness.install.region import REGION
from smllm.machine.configs.config import read_config

ABS = smllm_executable()  # what the CLI, run with this Python, writes in user-scope files
BARE = "smllm"  # what it writes in a project's files: the same bytes on every machine
FORWARDED = '["XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "SMLLM_CONFIG"]'
GOLDEN = ROOT / "golden" / "harness"
REPO = ROOT.parent
NAMES = ("claude", "codex", "copilot", "opencode", "agents")
SCOPES = [(h, "project") for h in NAMES] + [(h, "user") for h in NAMES[:-1]]

FAKE_CLAUDE = """\
#!{python}
import json, os, sys
with open(os.environ["FAKE_CLAUDE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_CLAUDE_FAIL"):
    sys.stderr.write("claude: something broke\\n")
    sys.exit(3)
if os.environ.get("FAKE_CLAUDE_NOOP"):
    sys.exit(0)
path = os.path.join(os.environ["HOME"], ".claude.json")
data = json.load(open(path)) if os.path.exists(path) else {{}}
servers = data.setdefault("mcpServers", {{}})
if sys.argv[1:3] == ["mcp", "remove"]:
    if servers.pop(sys.argv[-1], None) is None:
        sys.exit(1)
elif sys.argv[1:3] == ["mcp", "add-json"]:
    servers[sys.argv[-2]] = json.loads(sys.argv[-1])
json.dump(data, open(path, "w"))
"""


@pytest.fixture
def claude_env(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` with a fake `claude` first on PATH, logging its arguments to tmp/claude.log."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable))
    fake.chmod(0o755)
    log = str(tmp_path / "claude.log")
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "FAKE_CLAUDE_LOG": log}


def harness(cwd: Path, env: dict[str, str], *args: str) -> Ran:
    return smllm(["harness", *args], cwd, env)


def claude_log(env: dict[str, str]) -> list[list[str]]:
    log = Path(env["FAKE_CLAUDE_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def snapshot(*folders: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under the folders (but .smllm/): bytes, mtime (ns) and mode."""
    out = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and ".smllm" not in path.parts:
                st = path.stat()
                out[str(path)] = (path.read_bytes(), st.st_mtime_ns, stat.S_IMODE(st.st_mode))
    return out


def rendered(
    files: dict[str, tuple[bytes, int, int]], roots: dict[str, Path], scope: str = "user"
) -> str:
    """The files as one golden text, paths and the smllm path normalised."""
    written = BARE if scope == "project" else ABS
    out = []
    for path, (data, _, _) in files.items():
        name = path
        for label, root in roots.items():
            name = name.replace(str(root), label)
        text = data.decode()
        if name.endswith("smllm.js"):
            plugin = (REPO / "src/smllm/harness/assets/opencode-plugin.js").read_text()
            assert text == plugin.replace("__SMLLM__", json.dumps(written))
            text = "(assets/opencode-plugin.js, __SMLLM__ = the smllm path as a JSON string)\n"
        out.append(f"=== {name} ===\n{text.replace(ABS, 'SMLLM')}")
    return "".join(out)


def parts(ran: Ran) -> dict[str, str]:
    """PART → ACTION (or STATE) from text output (status's `hooks last ran` line aside)."""
    lines = [line.split(": ", 1) for line in ran.out.splitlines() if "hooks last ran" not in line]
    return {part: rest.split(" (")[0] for part, rest in lines}


@pytest.mark.parametrize(("name", "scope"), SCOPES)
def test_install_writes_the_golden_files_then_nothing(
    name: str, scope: str, project: Path, tmp_path: Path, claude_env: dict[str, str]
) -> None:
    home, xdg = Path(claude_env["HOME"]), Path(claude_env["XDG_CONFIG_HOME"])
    home.mkdir(exist_ok=True)
    config = project / ".smllm" / "config.toml"
    config_before = (config.read_bytes(), config.stat().st_mtime_ns)
    ran = harness(project, claude_env, "install", name, "--scope", scope)
    assert ran.code == 0, ran.err
    assert set(parts(ran).values()) == {"written"}
    files = snapshot(project, home, xdg)
    text = rendered(files, {"PROJECT": project, "HOME": home, "XDG": xdg}, scope)
    golden = GOLDEN / f"{name}-{scope}.txt"
    if os.environ.get("SMLLM_UPDATE_SNAPSHOTS"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    calls = claude_log(claude_env)
    if (name, scope) == ("claude", "user"):  # the server went through `claude mcp add-json`
        entry = json.dumps(
            {"type": "stdio", "command": ABS, "args": ["mcp"], "timeout": 900000}
        ).replace(", ", ",")
        assert calls == [["mcp", "add-json", "--scope", "user", "smllm", entry.replace(": ", ":")]]
    else:
        assert calls == []
    again = harness(project, claude_env, "install", name, "--scope", scope, "--json")
    assert again.code == 0, again.err
    report = json.loads(again.out)
    assert [p["state"] for p in report["parts"]] == ["current"] * len(report["parts"])
    assert {p["action"] for p in report["parts"]} == {"current"}
    assert snapshot(project, home, xdg) == files  # mtimes too: nothing rewritten
    assert claude_log(claude_env) == calls
    assert (config.read_bytes(), config.stat().st_mtime_ns) == config_before
    assert not (xdg / "smllm").exists()  # no user config either
    status = harness(project, claude_env, "status", name, "--scope", scope)
    assert status.code == 0 and set(parts(status).values()) == {"current"}


SETTINGS = {
    "model": "opus",
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "mine start"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "mine stop", "timeout": 5}]}],
    },
    "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(.env)"]},
    "statusLine": {"type": "command", "command": "my-status"},
}


def handler(hook: str, harness_: str = "claude") -> dict[str, Any]:
    command = f"{BARE} harness hook {harness_} {hook}"
    return {"type": "command", "command": command, "timeout": 30}


def test_merges_keep_every_user_entry(project: Path, env: dict[str, str]) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(SETTINGS, indent=4))
    settings.chmod(0o600)
    mcp = project / ".mcp.json"
    mcp.write_bytes(b'{"mcpServers": {"other": {"command": "x"}},\r\n "z": 1}\r\n')
    assert harness(project, env, "install", "claude").code == 0
    data = json.loads(settings.read_text())
    want = json.loads(json.dumps(SETTINGS))
    want["hooks"]["SessionStart"].append({"hooks": [handler("session-start")]})
    want["hooks"]["Stop"].append({"hooks": [handler("stop")]})
    want["hooks"]["UserPromptSubmit"] = [{"hooks": [handler("user-prompt-submit")]}]
    want["permissions"]["allow"].append("mcp__smllm__smllm")
    assert data == want
    assert list(data) == list(want) and list(data["hooks"]) == [
        "SessionStart",
        "Stop",
        "UserPromptSubmit",
    ]
    assert settings.read_text() == json.dumps(want, indent=2) + "\n"  # two spaces, final newline
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert mcp.read_bytes().count(b"\r\n") == mcp.read_bytes().count(b"\n")  # CRLF kept
    servers = json.loads(mcp.read_text())
    assert [*servers, *servers["mcpServers"]] == ["mcpServers", "z", "other", "smllm"]


def test_codex_toml_keeps_comments_and_other_tables(project: Path, env: dict[str, str]) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    original = '\ufeff# mine\nmodel = "o5"  # pinned\n\n[mcp_servers.other]\ncommand = "x"\n'
    config.write_text(original)
    assert harness(project, env, "install", "codex").code == 0
    added = (
        f'\n[mcp_servers.smllm]\ncommand = "{BARE}"\nargs = ["mcp"]\nenv_vars = {FORWARDED}\n'
        "tool_timeout_sec = 900\n"
        'default_tools_approval_mode = "approve"\n'
    )
    assert config.read_text() == original + added
    config.write_text(original + added.replace('"approve"', '"prompt"') + "# after\n")
    refused = harness(project, env, "install", "codex")
    assert refused.code == 1 and parts(refused)["mcp"] == "edited, left alone"
    assert harness(project, env, "install", "codex", "--force").code == 0
    assert config.read_text() == original + added + "# after\n"


def test_instructions_region_merge(project: Path, env: dict[str, str]) -> None:
    agents = project / "AGENTS.md"
    stray = "# Notes\r\n\r\n<!-- smllm:harness -->\r\nkeep me\r\n"
    old = "<!-- smllm:harness -->\r\n\r\nold words\r\n<!-- /smllm:harness -->\r\n"
    agents.write_bytes((stray + old + "after\r\n").encode())
    edited = harness(project, env, "install", "agents")
    assert edited.code == 1 and parts(edited) == {"instructions": "edited, left alone"}
    assert harness(project, env, "install", "agents", "--force").code == 0
    text = agents.read_bytes().decode()
    assert text == stray + REGION.replace("\n", "\r\n") + "after\r\n"  # CRLF kept
    # the region is compared word by word: whitespace alone isn't an edit
    rewrapped = text.replace("by smllm state machines. smllm", "by smllm state\r\nmachines.  smllm")
    agents.write_bytes(rewrapped.encode())
    again = harness(project, env, "install", "agents")
    assert again.out == "agents: nothing to do; smllm is installed as it should be\n"
    assert agents.read_bytes() == rewrapped.encode()
    agents.write_text("text without newline")
    assert (
        harness(project, env, "install", "codex", "--without", "mcp", "--without", "hooks").code
        == 0
    )
    assert agents.read_text() == "text without newline\n\n" + REGION
    agents.write_text("")
    assert harness(project, env, "install", "copilot").code == 0
    assert agents.read_text() == REGION


def test_claude_target_rule_and_symlink(project: Path, env: dict[str, str]) -> None:
    claude, agents = project / "CLAUDE.md", project / "AGENTS.md"

    def target() -> str:
        ran = harness(project, env, "status", "claude", "--json")
        return Path(json.loads(ran.out)["parts"][0]["path"]).name

    assert target() == "CLAUDE.md"  # neither: CLAUDE.md, created
    agents.write_text("a\n")
    assert target() == "AGENTS.md"  # only AGENTS.md
    claude.write_text("intro\n@AGENTS.md\n")
    assert target() == "AGENTS.md"  # both, CLAUDE.md imports AGENTS.md
    claude.write_text("intro\n")
    assert target() == "CLAUDE.md"  # both, without the import
    claude.unlink()
    claude.symlink_to("AGENTS.md")
    assert harness(project, env, "install", "claude").code == 0
    assert claude.is_symlink() and "<!-- /smllm:harness -->" in agents.read_text()


def test_edited_part_refuses_and_writes_nothing(project: Path, env: dict[str, str]) -> None:
    assert harness(project, env, "install", "claude").code == 0
    settings = project / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 60
    settings.write_text(json.dumps(data))
    (project / "CLAUDE.md").unlink()
    before = snapshot(project)
    refused = harness(project, env, "install", "claude")
    assert refused.code == 1
    assert parts(refused)["hooks"] == "edited, left alone"
    assert parts(refused)["instructions"] == "left alone"
    assert (
        f"error: {Path('.claude', 'settings.json')}: smllm's hooks part was changed" in refused.err
    )
    assert (
        "note: parts marked edited were changed by hand; smllm harness install claude --force"
        in refused.err
    )
    assert snapshot(project) == before
    as_json = harness(project, env, "install", "claude", "--json")
    assert as_json.code == 1 and len(as_json.out.splitlines()) == 1
    report = json.loads(as_json.out)
    assert report["parts"][2] == {
        "part": "hooks",
        "path": str(settings),
        "state": "edited",
        "action": "edited, left alone",
    }
    assert snapshot(project) == before
    status = harness(project, env, "status", "claude")
    assert status.code == 0 and parts(status)["hooks"] == "edited"
    forced = harness(project, env, "install", "claude", "--force")
    assert forced.code == 0 and parts(forced)["hooks"] == "written"
    assert json.loads(settings.read_text())["hooks"]["Stop"] == [{"hooks": [handler("stop")]}]


def test_force_touches_only_smllm_entries(project: Path, env: dict[str, str]) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "mine"}
    hooks = {
        "SessionStart": [{"hooks": [handler("session-start")]}],
        # smllm's handler, moved by the user into their own group with a matcher, plus a
        # second one of an older smllm in a group of its own
        "Stop": [
            {"matcher": "x", "hooks": [mine, {**handler("stop"), "timeout": 9}]},
            {"hooks": [{"type": "command", "command": "/old/bin/smllm harness hook claude stop"}]},
        ],
        "UserPromptSubmit": [{"hooks": [handler("user-prompt-submit")]}],
    }
    settings.write_text(json.dumps({"hooks": hooks}))
    assert harness(project, env, "install", "claude").code == 1
    assert harness(project, env, "install", "claude", "--force").code == 0
    data = json.loads(settings.read_text())["hooks"]
    # the older handler's group, left empty, is gone; the user's group keeps its matcher
    assert data["Stop"] == [{"matcher": "x", "hooks": [mine, handler("stop")]}]
    assert data["SessionStart"] == hooks["SessionStart"]


def test_without_and_with(project: Path, env: dict[str, str]) -> None:
    config = project / ".smllm" / "config.toml"
    original = config.read_text()
    assert harness(project, env, "install", "claude").code == 0
    settings = project / ".claude" / "settings.json"
    ran = harness(project, env, "install", "claude", "--without", "hooks", "--json")
    assert ran.code == 0
    rows = {p["part"]: (p["state"], p["action"]) for p in json.loads(ran.out)["parts"]}
    assert rows["hooks"] == ("declined", "removed") and rows["permissions"] == (
        "current",
        "current",
    )
    assert json.loads(settings.read_text()) == {"permissions": {"allow": ["mcp__smllm__smllm"]}}
    assert config.read_text() == original + '\n[harness.claude]\nwithout = ["hooks"]\n'
    loaded = read_config(str(config))
    assert loaded.ok and loaded.without == {"claude": ("hooks",)}  # the loader accepts it
    again = harness(project, env, "install", "claude", "--json")
    assert {p["part"]: p["action"] for p in json.loads(again.out)["parts"]}["hooks"] == "declined"
    back = harness(project, env, "install", "claude", "--with", "hooks")
    assert parts(back)["hooks"] == "written" and config.read_text() == original
    assert "SessionStart" in json.loads(settings.read_text())["hooks"]


def test_declining_every_part_uninstalls(project: Path, env: dict[str, str]) -> None:
    agents = project / "AGENTS.md"
    agents.write_text("# Mine\n")
    before = snapshot(project)
    for name in ("claude", "codex", "copilot", "opencode"):
        assert harness(project, env, "install", name).code == 0, name
    for name, names in (
        ("claude", "instructions mcp hooks permissions statusline"),
        ("codex", "instructions mcp hooks"),
        ("copilot", "instructions mcp hooks"),
        ("opencode", "instructions mcp plugin"),
    ):
        args = [w for part in names.split() for w in ("--without", part)]
        ran = harness(project, env, "install", name, *args)
        assert ran.code == 0, ran.err
    after = snapshot(project)
    assert {p: v[0] for p, v in after.items()} == {p: v[0] for p, v in before.items()}
    assert agents.read_text() == "# Mine\n"
    assert sorted(p.name for p in project.iterdir()) == [".smllm", "AGENTS.md"]  # no folders left
    status = harness(project, env, "status", "--json")
    listed = {h["harness"] for h in json.loads(status.out)["harnesses"]}
    assert listed == {"claude", "codex", "copilot", "opencode"}  # declined parts aren't missing


@pytest.mark.parametrize(
    ("name", "path", "text"),
    [
        ("claude", ".claude/settings.json", "{not json"),
        ("claude", ".claude/settings.json", '{"hooks": []}'),
        ("codex", ".codex/config.toml", "[mcp_servers\n"),
        ("opencode", "opencode.json", "[]"),
        ("agents", ".smllm/config.toml", "[harness\n"),
    ],
)
def test_file_that_does_not_parse(
    name: str, path: str, text: str, project: Path, env: dict[str, str]
) -> None:
    broken = project / path
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text(text)
    before = snapshot(project)
    ran = harness(project, env, "install", name)
    assert ran.code == 1
    assert f"error: can't read {Path(path)}: " in ran.err and "nothing was written" in ran.err
    assert snapshot(project) == before
    status = harness(project, env, "status", name)
    assert status.code == 0
    assert ("unreadable" in parts(status).values()) == (name != "agents")
    assert f"note: {Path(path)} doesn't parse" in status.err


def test_unmakeable_folder_stops_all_writes(project: Path, env: dict[str, str]) -> None:
    (project / ".github").write_text("")
    ran = harness(project, env, "install", "copilot", "--json")
    assert ran.code == 1 and json.loads(ran.out)["error"].startswith("can't write .github")
    assert not (project / "AGENTS.md").exists() and not (project / ".mcp.json").exists()


def test_status_lists_installed_harnesses(project: Path, env: dict[str, str]) -> None:
    empty = harness(project, env, "status", "--json")
    assert empty.code == 0 and json.loads(empty.out) == {"scope": "project", "harnesses": []}
    assert harness(project, env, "install", "codex").code == 0
    ran = harness(project, env, "status")
    assert ran.code == 0
    # codex's region is every AGENTS.md harness's, but only a part of its own makes a client
    # installed (issue 20 §8): the region alone is the shell agents' install
    lines = ran.out.splitlines()
    assert lines[:2] == ["codex:", "  instructions: current (AGENTS.md)"]
    assert [line for line in lines if line.endswith(":")] == ["codex:", "agents:"]
    assert "  mcp: current (.codex/config.toml)" in lines
    report = json.loads(harness(project, env, "status", "codex", "--json").out)
    assert set(report) == {"harness", "scope", "parts", "notes", "lastRan"}
    assert all("action" not in p for p in report["parts"])
    assert any("/hooks" in note for note in report["notes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["install", "cursor"], "error: no harness named cursor (claude, codex"),
        (["status", "cursor"], "error: no harness named cursor"),
        (["install", "claude", "--without", "plugin"], "error: claude has no part plugin"),
        (["install", "codex", "--with", "statusline"], "error: codex has no part statusline"),
        (["install", "agents", "--scope", "user"], "error: agents has no user scope"),
        (["status", "agents", "--scope", "user"], "error: agents has no user scope"),
        (["install", "codex", "--with", "mcp", "--without", "mcp"], "error: mcp is given to both"),
    ],
)
def test_bad_names_exit_2(
    args: list[str], message: str, project: Path, env: dict[str, str]
) -> None:
    ran = harness(project, env, *args, "--json")
    assert ran.code == 2 and ran.out == "" and ran.err.startswith(message)
    assert snapshot(project) == {}


def test_claude_user_scope_mcp(project: Path, claude_env: dict[str, str]) -> None:
    home = Path(claude_env["HOME"])
    home.mkdir()
    dot = home / ".claude.json"
    dot.write_text('{"mcpServers": {"smllm": {"command": "/old/smllm", "args": ["mcp"]}}}')
    refused = harness(project, claude_env, "install", "claude", "--scope", "user")
    assert refused.code == 1 and "mcp: edited, left alone (~/.claude.json)" in refused.out
    assert claude_log(claude_env) == [] and not (home / ".claude").exists()
    assert harness(project, claude_env, "install", "claude", "--scope", "user", "--force").code == 0
    entry = {"type": "stdio", "command": ABS, "args": ["mcp"], "timeout": 900000}
    assert claude_log(claude_env) == [
        ["mcp", "remove", "--scope", "user", "smllm"],
        ["mcp", "add-json", "--scope", "user", "smllm", json.dumps(entry, separators=(",", ":"))],
    ]
    assert json.loads(dot.read_text())["mcpServers"]["smllm"] == entry
    declined = harness(
        project, claude_env, "install", "claude", "--scope", "user", "--without", "mcp"
    )
    assert parts(declined)["mcp"] == "removed"
    assert claude_log(claude_env)[-1] == ["mcp", "remove", "--scope", "user", "smllm"]
    assert "smllm" not in json.loads(dot.read_text())["mcpServers"]
    user_config = Path(claude_env["XDG_CONFIG_HOME"]) / "smllm" / "config.toml"
    assert user_config.read_text() == '[harness.claude]\nwithout = ["mcp"]\n'


@pytest.mark.parametrize("broken", ["missing", "failing", "silent"])
def test_claude_missing_or_failing_refuses(
    broken: str, project: Path, claude_env: dict[str, str]
) -> None:
    home = Path(claude_env["HOME"])
    home.mkdir()
    env = dict(claude_env)
    if broken == "missing":
        env["PATH"] = os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "claude").exists()
        )
    elif broken == "failing":
        env["FAKE_CLAUDE_FAIL"] = "1"
    else:  # exits 0 but adds nothing
        env["FAKE_CLAUDE_NOOP"] = "1"
    ran = harness(project, env, "install", "claude", "--scope", "user", "--json")
    assert ran.code == 1 and len(json.loads(ran.out)["parts"]) == 5
    assert "error: claude" in ran.err and "nothing was written" in ran.err
    if broken == "silent":
        assert "error: claude mcp ran, but " in ran.err
    assert snapshot(home) == {}


def test_user_scope_homes_from_the_environment(
    project: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    env = {**env, "CODEX_HOME": str(tmp_path / "cx"), "COPILOT_HOME": str(tmp_path / "cp")}
    assert harness(project, env, "install", "codex", "--scope", "user").code == 0
    assert harness(project, env, "install", "copilot", "--scope", "user").code == 0
    assert harness(project, env, "install", "opencode", "--scope", "user").code == 0
    assert sorted(p.name for p in (tmp_path / "cx").iterdir()) == [
        "AGENTS.md",
        "config.toml",
        "hooks.json",
    ]
    assert (tmp_path / "cp" / "hooks" / "smllm.json").is_file()
    assert (tmp_path / "cp" / "copilot-instructions.md").is_file()
    assert (Path(env["XDG_CONFIG_HOME"]) / "opencode" / "plugins" / "smllm.js").is_file()


def test_project_root_is_the_nearest_smllm_folder(project: Path, env: dict[str, str]) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert harness(deep, env, "install", "agents").code == 0
    assert (project / "AGENTS.md").is_file() and not (deep / "AGENTS.md").exists()


def test_smllm_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(SmllmError, match="can't find the smllm executable"):
        smllm_executable()
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/smllm")
    assert smllm_executable() == "/usr/bin/smllm"
    (script := tmp_path / "smllm").write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert smllm_executable() == str(script)  # the one beside the running Python wins


def test_which_hook_commands_are_smllm_s() -> None:
    for command in (
        "smllm harness hook x y",
        "'/a b/smllm' harness hook claude stop",
        "C:\\s\\smllm.exe harness hook a b",
    ):
        assert is_own_command(command), command
    for command in ("smllmx harness hook a b", "/x/smllm harness hooks a", "smllm harness", None):
        assert not is_own_command(command), command


def test_claude_plugin_agrees_with_install(project: Path, env: dict[str, str]) -> None:
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    assert market["owner"]["name"] and [p["name"] for p in market["plugins"]] == ["smllm"]
    plugin_dir = REPO / market["plugins"][0]["source"]
    manifest = json.loads((plugin_dir / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "smllm" and manifest["version"] == smllm_version
    assert harness(project, env, "install", "claude").code == 0
    installed = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    plugin_hooks = json.loads((plugin_dir / "hooks" / "hooks.json").read_text())["hooks"]
    assert plugin_hooks == installed
    installed_mcp = json.loads((project / ".mcp.json").read_text())["mcpServers"]["smllm"]
    plugin_mcp = json.loads((plugin_dir / ".mcp.json").read_text())["mcpServers"]["smllm"]
    assert plugin_mcp == installed_mcp


def test_trust_notes_go_once_trusted(project: Path, env: dict[str, str]) -> None:
    codex_note = "note: Codex reads .codex/ only in a trusted project"
    claude_note = "note: Claude Code ignores the permission in .claude/settings.json until"
    assert codex_note in harness(project, env, "install", "codex").err
    assert claude_note in harness(project, env, "install", "claude").err
    codex = Path(env["HOME"]) / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    codex.write_text(f'[projects.{json.dumps(str(project))}]\ntrust_level = "trusted"\n')
    (Path(env["HOME"]) / ".claude.json").write_text(
        json.dumps({"projects": {str(project): {"hasTrustDialogAccepted": True}}})
    )
    assert codex_note not in harness(project, env, "status", "codex").err
    assert claude_note not in harness(project, env, "status", "claude").err


def test_statusline_note(project: Path, env: dict[str, str]) -> None:
    note = "note: no statusLine runs smllm statusline; ask Claude to use the smllm-statusline skill"
    ran = harness(project, env, "install", "claude")
    assert note in ran.err
    settings = project / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["statusLine"] = {"type": "command", "command": f"{ABS} statusline"}  # any smllm
    settings.write_text(json.dumps(data))
    again = harness(project, env, "install", "claude")
    assert again.code == 0 and note not in again.err and "restart Claude Code" in again.err
    data["statusLine"]["command"] = "other-statusline"
    settings.write_text(json.dumps(data))
    assert note in harness(project, env, "status", "claude").err
    assert note not in harness(project, env, "install", "claude", "--without", "statusline").err


def test_copilot_hooks_file_is_smllm_s_whole(project: Path, env: dict[str, str]) -> None:
    assert harness(project, env, "install", "copilot").code == 0
    hooks = project / ".github" / "hooks" / "smllm.json"
    written = hooks.read_text()
    hooks.write_text(written.replace('"timeoutSec": 30', '"timeoutSec": 30000'))
    assert parts(harness(project, env, "install", "copilot"))["hooks"] == "edited, left alone"
    assert parts(harness(project, env, "install", "copilot", "--force"))["hooks"] == "written"
    assert hooks.read_text() == written
    assert (
        parts(harness(project, env, "install", "copilot", "--without", "hooks"))["hooks"]
        == "removed"
    )
    assert not hooks.exists()
