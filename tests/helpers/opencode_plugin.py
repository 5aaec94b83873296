"""The OpenCode plugin under node, driven by a fake OpenCode: the driver, the fake smllm, the
scenario steps (tests/test_opencode_plugin.py, tests/test_opencode_subagents.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import require_tool

import smllm as smllm_package

ASSET = Path(smllm_package.__file__).parent / "harness" / "assets" / "opencode-plugin.js"
#: what `smllm harness install opencode` replaces with the smllm path as a JSON string
TOKEN = "__SMLLM__"
TITLE = "You are a title generator. You output ONLY a thread title. Nothing else."
OPENCODE = "You are opencode, an interactive CLI tool that helps users with software tasks."

DRIVER = r"""
import { execFileSync } from "node:child_process"
import { pathToFileURL } from "node:url"

const [pluginPath, scenarioPath] = process.argv.slice(2)
const steps = JSON.parse((await import("node:fs")).readFileSync(scenarioPath, "utf8"))
const module = await import(pathToFileURL(pluginPath).href)
const out = { exports: Object.keys(module), prompts: [], systems: [], calls: [] }
const plugin = module.default
out.id = plugin.id
out.serverType = typeof plugin.server
const useSync = steps.some((s) => s.op === "no-prompt-async")
const session = {
  prompt: async (args) => { out.prompts.push({ how: "prompt", ...args }); return { data: {} } },
}
if (!useSync) {
  session.promptAsync = async (args) => {
    out.prompts.push({ how: "promptAsync", ...args }); return { data: {} }
  }
}
const directory = process.env.PLUGIN_DIRECTORY || "/the/project"
const hooks = await plugin.server({ client: { session }, directory, worktree: "/" })
out.hooks = Object.keys(hooks).sort()
const pending = []
let lastSystem = ""
for (const step of steps) {
  let done
  if (step.op === "event") done = hooks.event({ event: step.event })
  else if (step.op === "chat") {
    const text = step.text === "<last prompt>"
      ? out.prompts[out.prompts.length - 1].body.parts[0].text : step.text
    done = hooks["chat.message"]({ sessionID: step.sessionID },
      { message: {}, parts: [{ type: "text", text }] })
  } else if (step.op === "system") {
    const output = { system: [...step.system] }
    const input = { sessionID: step.sessionID, model: {} }
    done = hooks["experimental.chat.system.transform"](input, output)
      .then(() => { out.systems.push(output.system); lastSystem = output.system.join("\n") })
  } else if (step.op === "tool") {
    const input = { tool: step.tool, sessionID: step.sessionID, callID: "call_1", args: step.args }
    done = hooks["tool.execute.after"](input, { title: "", output: "", metadata: {} })
  } else if (step.op === "sleep") done = new Promise((r) => setTimeout(r, step.ms))
  else if (step.op === "exec") {
    const key = (lastSystem.match(/session (sm-[a-z0-9]+)/) || [])[1]
    execFileSync(step.argv[0], step.argv.slice(1).map((a) => a.replace("{KEY}", key)),
      { stdio: "ignore" })
    done = Promise.resolve()
  } else done = Promise.resolve()
  if (step.nowait) pending.push(done)
  else await done
}
await Promise.all(pending)
console.log(JSON.stringify(out))
"""

FAKE = """\
#!{python}
import json, os, sys, time
folder = os.environ["FAKE_SMLLM"]
hook = sys.argv[-1]
data = sys.stdin.read()
with open(os.path.join(folder, "log.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": json.loads(data)}}) + "\\n")
with open(os.path.join(folder, "log.jsonl")) as f:
    calls = [json.loads(line)["argv"][-1] for line in f].count(hook)
def read(name, default):
    # HOOK.NAME.N answers the hook's Nth call (from 1); HOOK.NAME the calls without their own
    for path in (f"{{hook}}{{name}}.{{calls}}", hook + name):
        if os.path.exists(os.path.join(folder, path)):
            return open(os.path.join(folder, path)).read()
    return default
time.sleep(float(read(".sleep", "0")))
sys.stdout.write(read(".out", "{{}}\\n"))
sys.stderr.write(read(".err", ""))
sys.exit(int(read(".code", "0")))
"""


class Played:
    def __init__(self, result: dict[str, Any], stderr: str, log: list[dict[str, Any]]) -> None:
        self.result, self.stderr, self.log = result, stderr, log

    @property
    def hooks(self) -> list[tuple[str, dict[str, Any]]]:
        return [(c["argv"][-1], c["stdin"]) for c in self.log]

    @property
    def prompts(self) -> list[dict[str, Any]]:
        prompts: list[dict[str, Any]] = self.result["prompts"]
        return prompts


def install(folder: Path, bin_path: str) -> Path:
    """The plugin as the install writes it: the token replaced by the path as a JSON string."""
    text = ASSET.read_text()
    assert TOKEN in text
    plugin = folder / "smllm.js"
    plugin.write_text(text.replace(TOKEN, json.dumps(bin_path)))
    return plugin


def play(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    answers: dict[str, str] | None = None,
    bin_path: str | None = None,
    env: dict[str, str] | None = None,
) -> Played:
    node = require_tool("node", "install Node.js 18 or later")
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    if bin_path is None:
        script = tmp_path / "smllm-fake"
        script.write_text(FAKE.format(python=sys.executable))
        script.chmod(0o755)
        bin_path = str(script)
    for name, value in (answers or {}).items():
        (fake / name).write_text(value)
    plugin = install(tmp_path, bin_path)
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(steps))
    run_env = {**(os.environ if env is None else env), "FAKE_SMLLM": str(fake)}
    proc = subprocess.run(
        [node, str(driver), str(plugin), str(scenario)],
        capture_output=True,
        text=True,
        timeout=120,
        env=run_env,
    )
    assert proc.returncode == 0, proc.stderr
    log_file = fake / "log.jsonl"
    log = (
        [json.loads(line) for line in log_file.read_text().splitlines()]
        if log_file.exists()
        else []
    )
    return Played(json.loads(proc.stdout), proc.stderr, log)


def created(sid: str, parent: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"id": sid, "title": "New session"}
    if parent:
        info["parentID"] = parent
    return {
        "op": "event",
        "event": {"type": "session.created", "properties": {"sessionID": sid, "info": info}},
    }


def status(sid: str, kind: str) -> dict[str, Any]:
    return {
        "op": "event",
        "event": {
            "type": "session.status",
            "properties": {"sessionID": sid, "status": {"type": kind}},
        },
    }


def idle(sid: str) -> list[dict[str, Any]]:
    """What OpenCode sends when a turn ends: status idle, then the deprecated session.idle."""
    return [
        status(sid, "idle"),
        {"op": "event", "event": {"type": "session.idle", "properties": {"sessionID": sid}}},
    ]


def chat(sid: str, text: str, **more: Any) -> dict[str, Any]:
    return {"op": "chat", "sessionID": sid, "text": text, **more}


def system(sid: str, *parts: str) -> dict[str, Any]:
    return {"op": "system", "sessionID": sid, "system": list(parts)}


def tool(sid: str, name: str, **args: Any) -> dict[str, Any]:
    """OpenCode's `tool.execute.after` for a call of tool NAME with ARGS."""
    return {"op": "tool", "sessionID": sid, "tool": name, "args": args}


def start_answer(text: str) -> str:
    """The session-start hook's answer carrying TEXT."""
    output = {"hookEventName": "SessionStart", "additionalContext": text}
    return json.dumps({"hookSpecificOutput": output})


START = start_answer("<smllm>\nCTX\n</smllm>")
BLOCK = json.dumps({"decision": "block", "reason": "<smllm>\nBLOCK\n</smllm>"})
