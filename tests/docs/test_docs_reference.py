"""The docs keep up with the code: the generated reference pages are what scripts/docs_reference
writes now, and every CLI option, every validation rule and every client has its page."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from smllm.cli.parser import build
from smllm.machine.findings import HINTS, LEVELS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCRIPT = ROOT / "scripts" / "docs_reference"

#: each client `smllm harness install` takes, and its page
CLIENT_PAGES = {
    "claude": "clients/claude-code.md",
    "codex": "clients/codex.md",
    "copilot": "clients/copilot-cli.md",
    "opencode": "clients/opencode.md",
    "agents": "clients/shell-only.md",
}


def test_generated_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        "docs/reference/ differs from what scripts/docs_reference writes now; run it and "
        f"commit the pages:\n{done.stdout}{done.stderr}"
    )


def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
    """(command, option) for every option string of every command, hidden ones aside."""
    out: list[tuple[str, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            hidden = {a.dest for a in action._choices_actions if a.help == argparse.SUPPRESS}
            for name, sub in action.choices.items():
                if name not in hidden and not name.startswith("_"):
                    out += _options(sub, f"{path} {name}")
        elif action.help != argparse.SUPPRESS:
            out += [(path, option) for option in action.option_strings]
    return out


def test_every_cli_option_is_in_the_reference() -> None:
    page = (DOCS / "reference" / "cli.md").read_text()
    sections = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    }
    missing = [
        f"{command} {option}"
        for command, option in _options(build(), "smllm")
        if command not in sections
        or not re.search(rf"`(?:[^`|]*, )?{re.escape(option)}[ `,]", sections[command])
    ]
    assert not missing, f"options without a line in docs/reference/cli.md: {missing}"


def test_every_rule_is_in_the_reference() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "src" / "smllm").rglob("*.py"))
    rules = set(re.findall(r"\"((?:CFG|FMT|MCH|EVT|AGT|INS)-[0-9]+)\"", source))
    rules |= set(HINTS) | set(LEVELS)
    page = (DOCS / "reference" / "rules.md").read_text()
    headed = set(re.findall(r"^### ((?:CFG|FMT|MCH|EVT|AGT|INS)-[0-9]+)$", page, re.M))
    assert len(rules) >= 60, sorted(rules)
    assert sorted(rules - headed) == [], "rules without a section in docs/reference/rules.md"


@pytest.mark.parametrize("client", sorted(CLIENT_PAGES))
def test_every_client_has_a_page(client: str) -> None:
    from smllm.harness.install import parts as harness_parts  # the table install reads

    assert client in harness_parts.HARNESSES, sorted(harness_parts.HARNESSES)
    page = DOCS / CLIENT_PAGES[client]
    assert page.is_file(), f"{client} has no page {page}"
    assert f"smllm harness install {client}" in page.read_text()
    nav = (ROOT / "mkdocs.yml").read_text()
    assert CLIENT_PAGES[client] in nav


def test_no_client_without_a_page() -> None:
    from smllm.harness.install import parts as harness_parts

    assert sorted(harness_parts.HARNESSES) == sorted(CLIENT_PAGES)


def test_the_home_page_graph_is_what_smllm_draws(tmp_path: Path) -> None:
    """docs/index.md's Mermaid diagram is `smllm graph dev --mermaid` of the example machine."""
    examples = ROOT / "src" / "smllm" / "examples" / "dev"
    (tmp_path / ".smllm").mkdir()
    for name in ("config.toml", "dev.smllm.yaml"):
        (tmp_path / ".smllm" / name).write_bytes((examples / name).read_bytes())
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    drawn = subprocess.run(
        [sys.executable, "-m", "smllm", "graph", "dev", "--mermaid"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    page = (DOCS / "index.md").read_text()
    shown = re.search(r"^```mermaid\n(.*?)^```$", page, re.M | re.S)
    assert shown is not None, "docs/index.md has no mermaid block"
    assert shown.group(1) == drawn
