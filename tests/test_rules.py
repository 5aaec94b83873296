"""One fixture per rule of validation.md §2: each file under tests/rules/ is a small bad config or
machine that yields exactly the findings its leading comments expect.

Fixtures, by their shape:

- `rules/NAME.smllm.yaml`, or `rules/NAME/NAME.smllm.yaml` beside the files it needs: one
  machine file checked alone (`smllm validate --json --info FILE`, from its folder);
- `rules/NAME/config.toml`: an explicit config, checked from a copy of its folder;
- `rules/NAME/user/` and `rules/NAME/project/`: the user's config (`$XDG_CONFIG_HOME/smllm/`)
  and a project's `.smllm/`, checked by `smllm validate --json --info` from the project.

The expected findings lead the machine file or the (project's) config, one block each:

    # expect: RULE LEVEL LINE:COL PATH      (`-` for no position, or no path)
    # file: FILE                            (optional; default: the file holding the block)
    # message: MESSAGE                      (`{user}` stands for the user's config folder)
    # hint: HINT                            (`-` for none)

Each fixture is run once; `test_finding` checks everything but the positions,
`test_position` the line and column of each finding, so that a known gap of one doesn't hide
a regression of the other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from conftest import smllm

from smllm.machine.findings import HINTS, LEVELS

RULES = Path(__file__).parent / "rules"

#: validation.md §2, every rule but the INS ones, with its level.
RULE_LEVELS: dict[str, str] = {
    **{f"CFG-{n}": "error" for n in range(1, 13)},
    **{f"FMT-{n}": "error" for n in range(1, 8)},
    **{f"MCH-{n}": "error" for n in range(1, 20)},
    **{f"EVT-{n}": "error" for n in range(1, 14)},
    **{f"AGT-{n}": "error" for n in range(1, 6)},
    "CFG-6": "info",
    "CFG-7": "warning",
    "CFG-8": "warning",
    "CFG-12": "warning",
    "MCH-13": "warning",
    "MCH-14": "warning",
    "MCH-15": "warning",
    "MCH-16": "warning",
    "MCH-17": "warning",
    "MCH-18": "info",
    "EVT-13": "info",
    "MCH-19": "warning",
    "EVT-7": "warning",
    "EVT-10": "warning",
    "EVT-12": "info",
    "AGT-1": "warning",
    "AGT-3": "warning",
    "AGT-4": "warning",
    "AGT-5": "info",
}

#: Where smllm doesn't do what validation.md says: fixture → what differs (strict xfails, so a
#: fix shows up). Empty since the gaps these fixtures found were fixed.
FINDING_GAPS: dict[str, str] = {}
POSITION_GAPS: dict[str, str] = {}


class Fixture(NamedTuple):
    name: str
    kind: str  # "machine" | "config" | "project"
    source: Path  # the file whose comments hold the expectations
    default_file: str  # how `validate` names that file


def _fixtures() -> list[Fixture]:
    out = []
    for path in sorted(RULES.iterdir()):
        name = path.name.removesuffix(".smllm.yaml")
        if path.is_file() and path.name.endswith(".smllm.yaml"):
            out.append(Fixture(name, "machine", path, path.name))
        elif (path / f"{name}.smllm.yaml").is_file():
            out.append(Fixture(name, "machine", path / f"{name}.smllm.yaml", f"{name}.smllm.yaml"))
        elif (path / "config.toml").is_file():
            out.append(Fixture(name, "config", path / "config.toml", "config.toml"))
        elif (path / "project" / "config.toml").is_file():
            out.append(
                Fixture(name, "project", path / "project" / "config.toml", ".smllm/config.toml")
            )
    return out


FIXTURES = _fixtures()


class Expected(NamedTuple):
    rule: str
    level: str
    file: str
    line: int | None
    column: int | None
    path: str | None
    message: str
    hint: str | None


_COMMENT = re.compile(r"# (expect|file|message|hint): (.*)")
_EXPECT = re.compile(r"(\S+) (error|warning|info) (?:(\d+):(\d+)|-) (\S+)")


def expectations(fixture: Fixture) -> list[Expected]:
    """The `# expect:` blocks at the top of the fixture."""
    blocks: list[dict[str, str]] = []
    for raw in fixture.source.read_bytes().split(b"\n"):
        match = _COMMENT.fullmatch(raw.decode("utf-8", "replace"))
        if match is None:
            break
        key, value = match.groups()
        if key == "expect":
            blocks.append({})
        assert blocks and key not in blocks[-1], f"{fixture.source}: stray or repeated {key}"
        blocks[-1][key] = value
    assert blocks, f"{fixture.source} has no # expect: line"
    out = []
    for block in blocks:
        found = _EXPECT.fullmatch(block["expect"])
        assert found is not None, f"{fixture.source}: bad # expect: {block['expect']}"
        rule, level, line, col, path = found.groups()
        out.append(
            Expected(
                rule,
                level,
                block.get("file", fixture.default_file),
                int(line) if line else None,
                int(col) if col else None,
                None if path == "-" else path,
                block["message"],
                None if block["hint"] == "-" else block["hint"],
            )
        )
    return out


class Outcome(NamedTuple):
    code: int
    report: dict[str, Any]
    user: str  # the user's config folder, for {user}


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Fixture], Outcome]:
    """Runs `smllm validate --json --info` on a fixture, once per fixture for both tests."""
    done: dict[str, Outcome] = {}

    def run(fixture: Fixture) -> Outcome:
        if fixture.name in done:
            return done[fixture.name]
        tmp = tmp_path_factory.mktemp(fixture.name)
        # as conftest's `env`: XDG folders of its own, no SMLLM_CONFIG
        env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
        env.pop("SMLLM_TEST_UNSET_URL", None)  # CFG-10-url-env names it
        for key, folder in (
            ("XDG_STATE_HOME", "xdg-state"),
            ("XDG_CACHE_HOME", "xdg-cache"),
            ("XDG_CONFIG_HOME", "xdg-config"),
            ("HOME", "home"),
        ):
            env[key] = str(tmp / folder)
        user = tmp / "xdg-config" / "smllm"
        if fixture.kind == "machine":
            cwd = fixture.source.parent
            args = [fixture.source.name]
        elif fixture.kind == "config":
            cwd = tmp / fixture.name
            shutil.copytree(fixture.source.parent, cwd)
            args = ["config.toml"]
        else:
            cwd = tmp / "project"
            shutil.copytree(fixture.source.parent, cwd / ".smllm")
            shutil.copytree(fixture.source.parent.parent / "user", user)
            args = []
        ran = smllm(["validate", "--json", "--info", *args], cwd, env)
        assert ran.err == ""
        done[fixture.name] = Outcome(ran.code, json.loads(ran.out), str(user))
        return done[fixture.name]

    return run


def _params(gaps: dict[str, str]) -> list[Any]:
    return [
        pytest.param(
            f,
            id=f.name,
            marks=[pytest.mark.xfail(strict=True, reason=gaps[f.name])] if f.name in gaps else [],
        )
        for f in FIXTURES
    ]


@pytest.mark.parametrize("fixture", _params(FINDING_GAPS))
def test_finding(fixture: Fixture, validated: Callable[[Fixture], Outcome]) -> None:
    """Exactly the expected findings: rule, level, file, path, message and hint."""
    expected = expectations(fixture)
    outcome = validated(fixture)

    def key(f: tuple[str, str, str, str | None, str, str | None]) -> tuple[str, ...]:
        return tuple(x or "" for x in f)

    want = sorted(
        (
            (e.rule, e.level, e.file, e.path, e.message.replace("{user}", outcome.user), e.hint)
            for e in expected
        ),
        key=key,
    )
    got = sorted(
        (
            (f["rule"], f["level"], f["file"], f["path"], f["message"], f["hint"])
            for f in outcome.report["findings"]
        ),
        key=key,
    )
    assert got == want
    errors = sum(e.level == "error" for e in expected)
    assert outcome.code == (1 if errors else 0)
    assert outcome.report["ok"] is (errors == 0)
    assert outcome.report["counts"] == {
        level: sum(e.level == level for e in expected) for level in ("error", "warning", "info")
    }


@pytest.mark.parametrize("fixture", _params(POSITION_GAPS))
def test_position(fixture: Fixture, validated: Callable[[Fixture], Outcome]) -> None:
    """Each finding at the expected line and column (validation.md §3)."""
    want = sorted((e.rule, e.file, e.line or 0, e.column or 0) for e in expectations(fixture))
    got = sorted(
        (f["rule"], f["file"], f["line"] or 0, f["column"] or 0)
        for f in validated(fixture).report["findings"]
    )
    assert got == want


def test_every_rule_has_a_fixture() -> None:
    covered = {e.rule for f in FIXTURES for e in expectations(f)}
    assert sorted(set(RULE_LEVELS) - covered) == []
    assert covered <= set(RULE_LEVELS)


def test_fixture_names_start_with_their_rule() -> None:
    for fixture in FIXTURES:
        rule = re.match(r"[A-Z]+-\d+", fixture.name)
        assert rule is not None, fixture.name
        assert rule.group() in [e.rule for e in expectations(fixture)], fixture.name


def test_expected_levels_are_the_rules_levels() -> None:
    for fixture in FIXTURES:
        for e in expectations(fixture):
            assert e.level == RULE_LEVELS[e.rule], (fixture.name, e.rule)


def test_the_rule_tables_of_smllm_match_the_list() -> None:
    """smllm's own tables name no other rule and give each rule its level."""
    ins = {f"INS-{n}" for n in range(1, 7)}
    assert set(HINTS) <= set(RULE_LEVELS) | ins
    assert set(LEVELS) <= set(RULE_LEVELS) | ins
    for rule, level in RULE_LEVELS.items():
        assert LEVELS.get(rule, "error") == level, rule
