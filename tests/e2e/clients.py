"""One runner per real client: a fresh project (the example machine) and a fresh HOME, the
client's own settings and trust seeds, and an `env -i` style environment pointing it at the
fake model. Facts behind every setting: real-clients.md (the shared client lab's findings).

The clients come from tests/clients (`npm ci --prefix tests/clients`, scripts/test runs it);
smllm from this interpreter's bin folder, so hooks and the MCP server run the code under test.
A run that outlives its timeout fails the test as a hang."""

from __future__ import annotations

import contextlib
import html
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit
from conftest import require_tool

from e2e.fake_model import Call, FakeModel

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
MODULES = CLIENTS / "node_modules"
#: each client's executable; OpenCode's is its linux-x64 package's binary (package.json says why)
BINARIES = {
    "claude": MODULES / ".bin" / "claude",
    "codex": MODULES / ".bin" / "codex",
    "copilot": MODULES / ".bin" / "copilot",
    "opencode": MODULES / "opencode-linux-x64" / "bin" / "opencode",
}
#: Copilot unpacks its 235 MB JS package into HOME on first start; one copy serves every run
COPILOT_PKG = MODULES / ".copilot-pkg-cache"
INSTALL = "npm ci --prefix tests/clients"
#: smllm's folders (conftest's `env` fixture sets the same ones)
XDG = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
TIMEOUT = 180  # seconds for one client run; clients take 2 – 15 s
QUIET = 2.0  # seconds an OpenCode server must stay idle to count as done


@dataclass(frozen=True)
class Sandbox:
    """A test's fresh folders and smllm's environment (the store lives in `xdg-state`)."""

    root: Path
    project: Path
    home: Path
    env: dict[str, str]


@dataclass(frozen=True)
class Ran:
    argv: list[str]
    code: int
    out: str
    err: str
    seconds: float

    def describe(self) -> str:
        return (
            f"{' '.join(self.argv[:3])}… exited {self.code} after {self.seconds:.1f} s\n"
            f"stdout: {self.out[-3000:]}\nstderr: {self.err[-3000:]}"
        )


def sandbox(root: Path) -> Sandbox:
    """Fresh HOME and XDG folders under ROOT, and a project holding the example machine.

    PATH is this interpreter's bin folder (smllm), node's folder and the system's: nothing of the
    caller's environment leaks in."""
    from smllm.cli.demo import copy_example

    node = require_tool("node", "apt-get install nodejs npm (Node 20 or newer)")
    project, home = root / "project", root / "home"
    project.mkdir()
    home.mkdir()
    copy_example(str(project))
    folders = [
        str(Path(sys.executable).parent),
        str(Path(node).parent),
        "/usr/local/bin",
        "/usr/bin",
        "/bin",
    ]
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(folders)),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(root / "xdg-state"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
    }
    return Sandbox(root, project, home, env)


def client_bin(name: str) -> str:
    path = BINARIES[name]
    if not path.exists():
        pytest.fail(f"needs the pinned {name} client: {INSTALL} (scripts/test installs it)")
    return require_tool(str(path), INSTALL)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = TIMEOUT) -> Ran:
    """Run a client to its end, in its own process group (killed whole on a hang)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{argv[0]} hung (still running after {timeout} s)\n{err[-3000:]}")
    kill_group(proc.pid)  # anything it left behind, such as an MCP server
    return Ran(argv, proc.returncode, out, err, time.monotonic() - start)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # none left
        os.killpg(pid, signal.SIGKILL)


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


class Client:
    """One client: how it writes PLAN.md, what it needs besides `smllm harness install`, and
    how it runs a prompt (the first run starts a session, the second resumes it)."""

    name = ""
    #: smllm's harness for this client (`smllm harness install NAME`)
    harness = ""

    def __init__(self, box: Sandbox, model_url: str) -> None:
        self.box = box
        self.model_url = model_url
        self.session_id = str(uuid.uuid4())  # where the client lets us choose it

    def write_plan(self, text: str) -> Call:
        raise NotImplementedError

    def prepare(self) -> None:
        """Settings and trust seeds beyond what `smllm harness install` writes."""

    def as_stop_reason(self, text: str) -> str:
        """TEXT as the model sees it when a stop hook blocks with it as the reason."""
        return text

    def env(self) -> dict[str, str]:
        return dict(self.box.env)

    def run(self, prompt: str, resume: bool) -> Ran:
        raise NotImplementedError

    def settle(self) -> None:
        """After a run: wait until the client is done with its turn."""

    def close(self) -> None:
        """Stop anything the client left running."""


class Claude(Client):
    """Claude Code in print mode, Anthropic Messages API. The trust seed makes it honour the
    project's `permissions.allow`; ENABLE_TOOL_SEARCH=false offers MCP tools up front."""

    name = harness = "claude"

    def write_plan(self, text: str) -> Call:
        return Call("Write", {"file_path": str(self.box.project / "PLAN.md"), "content": text})

    def prepare(self) -> None:
        trust = {"hasTrustDialogAccepted": True}
        write_json(self.box.home / ".claude.json", {"projects": {str(self.box.project): trust}})

    def env(self) -> dict[str, str]:
        return {
            **self.box.env,
            "ANTHROPIC_BASE_URL": self.model_url,
            "ANTHROPIC_API_KEY": "sk-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "ENABLE_TOOL_SEARCH": "false",
            # no MCP_CONNECTION_NONBLOCKING=false: -p waits about 2 s for MCP servers, then
            # sends its first request without the tools of one not ready; smllm mcp answers
            # initialize and tools/list before its SDK is imported, well within that
        }

    def run(self, prompt: str, resume: bool) -> Ran:
        which = ["--resume", self.session_id] if resume else ["--session-id", self.session_id]
        # acceptEdits: the Write tool needs no prompt; the smllm tool is allowed by the install
        argv = [
            client_bin("claude"),
            "-p",
            prompt,
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
            *which,
        ]
        return run(argv, self.box.project, self.env())


class Codex(Client):
    """Codex `exec`, OpenAI Responses API. Its user config (CODEX_HOME) names the fake
    provider, turns analytics off (5 s at exit otherwise) and trusts the project, so the
    project's `.codex/` files that the install writes are read; hooks run only with
    --dangerously-bypass-hook-trust (`codex exec` can't approve them)."""

    name = harness = "codex"

    def write_plan(self, text: str) -> Call:
        return Call("exec_command", {"cmd": f"printf '%s' {shlex.quote(text)} > PLAN.md"})

    def as_stop_reason(self, text: str) -> str:
        # Codex wraps the reason in <hook_prompt …>…</hook_prompt>, XML-escaping it
        return html.escape(text, quote=False)

    @property
    def codex_home(self) -> Path:
        return self.box.home / ".codex"

    def prepare(self) -> None:
        self.codex_home.mkdir(exist_ok=True)
        (self.codex_home / "config.toml").write_text(
            'model = "fake-model"\n'
            'model_provider = "fake"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n'
            "\n[model_providers.fake]\n"
            'name = "Fake loopback provider"\n'
            f'base_url = "{self.model_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "FAKE_API_KEY"\n'
            "\n[analytics]\nenabled = false\n"
            f"\n[projects.{json.dumps(str(self.box.project))}]\n"
            'trust_level = "trusted"\n'
        )
        # Codex gives an MCP server only a fixed list of variables (HOME, PATH, USER…): the
        # install's entry forwards smllm's, or `smllm mcp` would open another store than the
        # hooks. `codex exec` sends its first request after about a second without the tools
        # of a server not ready by then (smllm's tools/list waits for the SDK's import, 1 – 2 s
        # on a busy machine) unless the server is `required`, which the install doesn't write:
        # the test adds it. (A `-c` override or a user-config entry of the same name replaces
        # the project's entry instead of adding to it.)
        installed = self.box.project / ".codex" / "config.toml"
        config = tomlkit.parse(installed.read_text())
        entry = config["mcp_servers"]["smllm"]  # type: ignore[index]
        assert set(XDG) <= set(entry.get("env_vars", [])), installed.read_text()
        if "required" not in entry:
            entry["required"] = True
            installed.write_text(tomlkit.dumps(config))

    def env(self) -> dict[str, str]:
        return {**self.box.env, "CODEX_HOME": str(self.codex_home), "FAKE_API_KEY": "sk-dummy"}

    def run(self, prompt: str, resume: bool) -> Ran:
        flags = ["--skip-git-repo-check", "--json", "--dangerously-bypass-hook-trust"]
        if resume:
            argv = [client_bin("codex"), "exec", "resume", *flags, self.session_id, prompt]
        else:
            argv = [client_bin("codex"), "exec", *flags, prompt]
        ran = run(argv, self.box.project, self.env())
        for line in ran.out.splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "thread.started":
                self.session_id = event["thread_id"]
        return ran


class Copilot(Client):
    """GitHub Copilot CLI in its offline BYOK mode (no GitHub login), Chat Completions API.
    COPILOT_ALLOW_ALL=true trusts the folder (so it reads the project's hooks and `.mcp.json`)
    and allows every tool, which -p needs; --trust-folder would do too, but Copilot refuses it
    together with --session-id or --resume."""

    name = harness = "copilot"

    def write_plan(self, text: str) -> Call:
        return Call("create", {"path": str(self.box.project / "PLAN.md"), "file_text": text})

    def prepare(self) -> None:
        COPILOT_PKG.mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        return {
            **self.box.env,
            "COPILOT_HOME": str(self.box.home / ".copilot"),
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": self.model_url + "/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "sk-dummy",
            "COPILOT_MODEL": "fake-model",
            "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": "100000",
            "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS": "4096",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_ALLOW_ALL": "true",
            # the unpacked package goes to $COPILOT_PKG_CACHE_HOME/pkg (else $XDG_CACHE_HOME)
            "COPILOT_PKG_CACHE_HOME": str(COPILOT_PKG),
        }

    def run(self, prompt: str, resume: bool) -> Ran:
        which = ["--resume", self.session_id] if resume else ["--session-id", self.session_id]
        argv = [
            client_bin("copilot"),
            "-p",
            prompt,
            "--output-format",
            "json",
            "--no-auto-update",
            *which,
        ]
        return run(argv, self.box.project, self.env())


def wait_for_line(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"`opencode serve` never said {text!r}:\n{path.read_text(errors='replace')}")


class OpenCode(Client):
    """OpenCode through `opencode serve` and `opencode run --attach`: only a server goes on
    after the plugin's re-prompt on `session.idle` (plain `opencode run` exits with the turn).
    The fake provider is in the user config (the install writes the project's). OpenCode
    npm-installs its plugin package into each config folder at start; npm_config_offline makes
    that fail at once instead of after about 70 s. Never probe `GET /` on the server: it proxies
    the web UI from the internet and hangs offline."""

    name = harness = "opencode"
    # the second `run --attach --session` goes on in the same server session: no
    # session.created, so no session start; the plugin asks for the view at the user message

    def __init__(self, box: Sandbox, model_url: str) -> None:
        super().__init__(box, model_url)
        self.server: subprocess.Popen[bytes] | None = None
        self.url = ""

    def write_plan(self, text: str) -> Call:
        return Call("write", {"filePath": str(self.box.project / "PLAN.md"), "content": text})

    def prepare(self) -> None:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake loopback",
            "options": {"baseURL": self.model_url + "/v1", "apiKey": "sk-dummy"},
            "models": {"fake-model": {"name": "Fake Model", "tool_call": True}},
        }
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fake": provider},
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        }
        write_json(Path(self.box.env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json", config)

    def env(self) -> dict[str, str]:
        return {
            **self.box.env,
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "npm_config_offline": "true",
        }

    def start(self) -> None:
        port = free_port()
        log = self.box.root / "opencode-serve.out"
        self.server = subprocess.Popen(
            [client_bin("opencode"), "serve", "--hostname", "127.0.0.1", "--port", str(port)],
            cwd=self.box.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for_line(log, "listening on", self.server, 60)
        self.url = f"http://127.0.0.1:{port}"

    def run(self, prompt: str, resume: bool) -> Ran:
        if self.server is None:
            self.start()
        which = ["--session", self.session_id] if resume else []
        argv = [
            client_bin("opencode"),
            "run",
            "--format",
            "json",
            "--attach",
            self.url,
            "--dir",
            str(self.box.project),
            *which,
            prompt,
        ]
        ran = run(argv, self.box.project, self.env())
        for line in ran.out.splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            if isinstance(event.get("sessionID"), str):
                self.session_id = event["sessionID"]
        return ran

    def settle(self) -> None:
        """`run --attach` returns at the first idle, while the plugin's re-prompt goes on in
        the server: wait until every session of the project has been idle for QUIET seconds
        (the plugin's stop hook runs on `session.idle`, and a block would make it busy again)."""
        query = urllib.parse.urlencode({"directory": str(self.box.project)})
        end = time.monotonic() + TIMEOUT
        quiet_since = time.monotonic()
        while time.monotonic() < end:
            with urllib.request.urlopen(f"{self.url}/session/status?{query}", timeout=10) as r:
                status = json.load(r)
            if any(s.get("type") != "idle" for s in status.values()):
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET:
                return
            time.sleep(0.2)
        pytest.fail(f"OpenCode's session stayed busy for {TIMEOUT} s")

    def close(self) -> None:
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait()


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, for a server to take."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLIENT_TYPES: dict[str, type[Client]] = {c.name: c for c in (Claude, Codex, Copilot, OpenCode)}


#: a whole run's steps may take this long (the clients take 2 – 15 s)
SETTLE = 120.0


def settle(model: FakeModel, client: Client, steps: int, ran: Ran) -> None:
    """Wait for the run's last step (OpenCode's server goes on after `run --attach` exits),
    then for the client to finish its stop; the model must have stayed on script."""
    assert model.wait(steps, SETTLE), f"{client.name} hung at step {model.taken}\n{ran.describe()}"
    client.settle()
    where = f"(requests in {model.logdir})\n{ran.describe()}"
    assert model.mismatches == [], f"{client.name} went off script: {model.mismatches} {where}"
