"""The seed's example session, replayed byte for byte by real `smllm` processes."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, smllm
from helpers.golden import GOLDEN, SEED_KEY, parse

SHARED = ROOT.parent.parent / "shared" / "spec" / "example" / "transcript.txt"


#: the SHA-256 of spec/example/transcript.txt as the project took it: the repo owns its copy, so
#: the check holds (and asserts) on a machine without ../shared too
GOLDEN_SHA256 = "c16ce39040e9064823bbe1109405edeeca0e8388d40ae6c7822427e9c2d205e1"


def test_golden_copy_is_the_spec_example() -> None:
    assert hashlib.sha256(GOLDEN.read_bytes()).hexdigest() == GOLDEN_SHA256
    if SHARED.exists():  # and where the spec is at hand, it hasn't moved on without us
        assert SHARED.read_bytes() == GOLDEN.read_bytes()


@pytest.mark.parametrize("form", ["yaml", "compiled"])
def test_transcript(project: Path, env: dict[str, str], form: str) -> None:
    if form == "compiled":
        # the loader takes the normal form back, and the agent sees the very same text
        made = smllm(["compile", ".smllm/dev.smllm.yaml", "-o", ".smllm/dev.json"], project, env)
        assert (made.code, made.out, made.err) == (0, "", "")
        config = project / ".smllm" / "config.toml"
        config.write_text(config.read_text().replace("dev.smllm.yaml", "dev.json"))
        (project / ".smllm" / "dev.smllm.yaml").unlink()
    new = smllm(["session", "new", "--json"], project, env)
    assert new.code == 0, new.err
    import json

    key = json.loads(new.out)["session"]
    assert re.fullmatch(r"sm-[0-9a-hjkmnp-tv-z]{6}", key)
    steps = parse(GOLDEN.read_text())
    assert len(steps) == 12
    for command, expected, code in steps:
        command = command.replace(SEED_KEY, key)
        if command.startswith("smllm "):
            import shlex

            ran = smllm(shlex.split(command)[1:], project, env)
            assert ran.out == expected.replace(SEED_KEY, key), command
            assert ran.code == code, (command, ran.err)
            assert ran.err == ""
        else:
            proc = subprocess.run(command, shell=True, cwd=project, env=env)
            assert proc.returncode == code
