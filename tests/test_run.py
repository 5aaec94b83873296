"""`smllm run` plays the seed's example with a scripted model: enter, planned with the guard
false, write PLAN.md with the `write` tool, planned, yield; then `--session` continues: done,
and the model's last words. Each OBS is what the same call prints in the golden transcript;
the first USR of each run is what `smllm session show` prints at that point; the store's
history is exactly the accepted events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import smllm
from helpers.golden import golden_output
from helpers.scripts import act, turns_of, write_script
from helpers.storerows import StoreRows

from smllm.mcp.texts import AGENT_RULES

PLAN_TEXT = "Rename the option `--colour` to `--color`.\n"
#: the CAPS of PLAN as the model gets it (the events list of `session show`, as tools)
CAPS_PLAN = Path(__file__).parent / "golden" / "run" / "caps-plan.json"


def obs(block: dict[str, Any]) -> dict[str, Any]:
    assert block["type"] == "obs"
    value: dict[str, Any] = json.loads(block["text"])
    return value


def test_the_example_played_by_a_scripted_model(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    first = write_script(
        tmp_path,
        "first.json",
        [{"type": "out", "text": "I will plan."}, act("a1", "planned", size="small")],
        [act("a2", "write", path="PLAN.md", content=PLAN_TEXT), act("a3", "planned", size="small")],
        [act("a4", "yield", note="Waiting for the user to approve the plan.")],
    )
    ran = smllm(
        [
            "run",
            "dev",
            "--ref",
            "GH-12",
            "--backend",
            f"scripted:{first}",
            "--tools",
            "read,write",
            "--json",
        ],
        project,
        env,
    )
    assert ran.code == 0, ran.err
    summary = json.loads(ran.out)
    key = summary["session"]
    assert {k: summary[k] for k in ("stop", "machine", "state", "ref", "turns", "events")} == {
        "stop": "yield",
        "machine": "dev",
        "state": "WORK",
        "ref": "GH-12",
        "turns": 3,
        "events": 3,
    }
    assert summary["acts"] == {"accepted": 4, "refused": 0}
    assert (project / "PLAN.md").read_text() == PLAN_TEXT
    turns = turns_of(summary)
    assert [t["turn"] for t in turns] == [1, 2, 3]

    # turn 1: CTRL, SYS, CAPS, USR (the block `session show` prints after enter)
    one = turns[0]["runtime"]
    assert [b["type"] for b in one] == ["ctrl", "sys", "caps", "usr"]
    assert json.loads(one[0]["text"]) == {"reasoning": {"mode": "adaptive", "max_tokens": 256}}
    assert one[1]["text"] == AGENT_RULES
    caps = json.loads(one[2]["text"])
    assert caps["tools"][:4] == json.loads(CAPS_PLAN.read_text())["tools"]
    assert [t["name"] for t in caps["tools"][4:]] == ["read", "write"]
    assert one[3]["text"] + "\n" == golden_output("smllm session show sm-nqvfvw", key, 2)

    # turn 2: only the OBS of planned (guard false: PLAN again), as `smllm fire` prints it
    two = turns[1]["runtime"]
    assert [b["type"] for b in two] == ["obs"]
    fired = golden_output("smllm fire --session sm-nqvfvw planned --param size=small", key, 1)
    assert obs(two[0]) == {"caused_by": "a1", "ok": True, "content": fired.removesuffix("\n")}

    # turn 3: the new CAPS of WORK, the write's OBS, then planned's (guard true: WORK)
    three = turns[2]["runtime"]
    assert [b["type"] for b in three] == ["caps", "obs", "obs"]
    names = [t["name"] for t in json.loads(three[0]["text"])["tools"]]
    assert names == ["done", "yield", "pause", "unmatched", "read", "write"]
    assert obs(three[1])["caused_by"] == "a2" and obs(three[1])["ok"] is True
    fired = golden_output("smllm fire --session sm-nqvfvw planned --param size=small", key, 2)
    assert obs(three[2]) == {"caused_by": "a3", "ok": True, "content": fired.removesuffix("\n")}

    # the conversation file ends with the yield's OBS (the run ended on it)
    conversation = json.loads(Path(summary["transcript"].replace(".turns.", ".smi.")).read_text())
    last = conversation["transmissions"][-1]
    yielded = golden_output(
        'smllm fire --session sm-nqvfvw yield --param "note=Waiting for the user to approve the '
        'plan."',
        key,
    )
    assert [obs(b) for b in last] == [
        {"caused_by": "a4", "ok": True, "content": yielded.removesuffix("\n")}
    ]
    assert len(conversation["transmissions"]) == 7  # 3 turns of 2, and the last OBS

    # --session goes on from where the run yielded: done, then the model's last words
    shown = smllm(["session", "show", key], project, env)
    second = write_script(
        tmp_path,
        "second.json",
        [act("b1", "done")],
        [{"type": "out", "text": "Renamed --colour to --color."}],
    )
    ran = smllm(
        ["run", "--session", key, "--backend", f"scripted:{second}", "--json"], project, env
    )
    assert ran.code == 0, ran.err
    summary = json.loads(ran.out)
    assert summary["stop"] == "complete"
    assert (summary["state"], summary["final"], summary["turns"]) == (
        "DONE",
        "Renamed --colour to --color.",
        2,
    )
    turns = turns_of(summary)
    assert summary["transcript"].endswith("run-2.turns.jsonl")
    assert turns[0]["runtime"][3]["text"] + "\n" == shown.out
    # the completion's OBS is the golden transcript's `done`, then a turn with no tools
    done = golden_output("smllm fire --session sm-nqvfvw done", key, 2)
    assert [b["type"] for b in turns[1]["runtime"]] == ["caps", "obs"]
    assert json.loads(turns[1]["runtime"][0]["text"]) == {"tools": []}
    assert obs(turns[1]["runtime"][1]) == {
        "caused_by": "b1",
        "ok": True,
        "content": done.removesuffix("\n"),
    }

    # the store holds exactly the accepted events, in order
    rows = StoreRows.of(project, env)
    (instance,) = rows.instance_rows(ref="GH-12")
    history = [(h["event"], h["from"], h["to"]) for h in rows.history(instance["id"])]
    assert history == [
        ("enter", None, "PLAN"),
        ("planned", "PLAN", "PLAN"),
        ("planned", "PLAN", "WORK"),
        ("yield", "WORK", "WORK"),
        ("done", "WORK", "DONE"),
    ]
    assert rows.integrity() == "ok"


def out(text: str) -> list[dict[str, Any]]:
    return [{"type": "out", "text": text}]


def run_json(project: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    ran = smllm(["run", *args, "--json"], project, env)
    return ran.code, json.loads(ran.out) if ran.out else {}, ran.err


def test_a_stop_is_blocked_then_a_second_is_a_runaway(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path, "s.json", out("All done."), out("Really."), out("Never said."))
    code, summary, err = run_json(
        project, env, "dev", "--ref", "GH-3", "--backend", f"scripted:{script}"
    )
    assert code == 1, err
    assert (summary["stop"], summary["turns"], summary["events"]) == ("runaway", 2, 0)
    key = summary["session"]
    turns = turns_of(summary)
    # the blocked stop's OBS is the engine's block: header and events list, no instructions
    shown = smllm(["session", "show", key], project, env).out
    block = shown.replace(
        "<instructions>\nWrite a plan for the issue in PLAN.md, then fire planned.\n"
        "</instructions>\n",
        "",
    )
    assert turns[1]["runtime"] == [{"type": "obs", "text": block.removesuffix("\n")}]
    audit = smllm(["session", "show", key, "--audit", "--json"], project, env)
    kinds = [a["kind"] for a in json.loads(audit.out)["audit"]]
    assert kinds == ["bind", "event", "block", "runaway"]
    # the instance stays in PLAN, held: --session goes on from there
    again = write_script(tmp_path, "again.json", [act("c1", "pause")])
    code, summary, err = run_json(project, env, "--session", key, "--backend", f"scripted:{again}")
    assert (code, summary["stop"], summary["state"]) == (0, "paused", "PLAN"), err


def test_a_paused_run_is_entered_again_by_session(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path, "s.json", [act("a1", "pause")])
    code, summary, _ = run_json(
        project, env, "dev", "--ref", "GH-4", "--backend", f"scripted:{script}"
    )
    assert (code, summary["stop"], summary["events"]) == (0, "paused", 1)
    key = summary["session"]
    idle = smllm(["session", "show", key], project, env).out
    assert "Paused:\n- issue GH-4 (dev) at PLAN\n" in idle
    go_on = write_script(tmp_path, "go.json", [act("b1", "yield")])
    code, summary, err = run_json(project, env, "--session", key, "--backend", f"scripted:{go_on}")
    assert (code, summary["stop"], summary["ref"], summary["state"]) == (
        0,
        "yield",
        "GH-4",
        "PLAN",
    ), err
    first = turns_of(summary)[0]["runtime"]
    assert first[3]["text"].startswith(
        f"<smllm>\nsession {key} · dev › PLAN (visit 2) · issue GH-4"
    )
    rows = StoreRows.of(project, env)
    (instance,) = rows.instance_rows(ref="GH-4")
    events = [h["event"] for h in rows.history(instance["id"])]
    assert events == ["enter", "pause", "enter", "yield"]


def test_max_turns_ends_the_run_with_the_instance_held(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    planned = [act(f"a{n}", "planned", size="small") for n in range(5)]
    script = write_script(tmp_path, "s.json", *[[a] for a in planned])
    code, summary, _ = run_json(
        project, env, "dev", "--ref", "GH-5", "--backend", f"scripted:{script}", "--max-turns", "3"
    )
    assert (code, summary["stop"], summary["turns"], summary["events"]) == (1, "max-turns", 3, 3)
    assert summary["state"] == "PLAN"
    # fed ids stay flat: turns 2 and 3 feed the same-sized OBS (the guard's false reply)
    fed = [len(t["fed"]) for t in turns_of(summary)]
    assert fed[0] > 5 * fed[1] and fed[1] == fed[2]


def test_the_human_summary(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    script = write_script(tmp_path, "s.json", [act("a1", "yield")])
    ran = smllm(["run", "dev", "--ref", "GH-6", "--backend", f"scripted:{script}"], project, env)
    assert ran.code == 0
    key = ran.out.split("--session ")[1].split()[0]
    runs = Path(env["XDG_STATE_HOME"]) / "smllm" / "runs" / key
    (turn,) = [json.loads(line) for line in (runs / "run-1.turns.jsonl").read_text().splitlines()]
    fed, generated = len(turn["fed"]), len(turn["generated"])
    assert generated == 59  # <|act|>, the JSON and its two "\n", <|eot|>
    assert ran.out == (
        f"yield: yielded in PLAN (dev › PLAN; 1 turns, 1 events, {fed} ids fed, 59 generated)\n"
        f"continue with: smllm run --session {key} and the same --model or --backend\n"
    )
    assert ran.err == (
        f"turn 1: ✓ yield {{}}; fed {fed} · generated 59 · {turn['ms']:.0f} ms; now dev › PLAN\n"
    )


def test_an_enter_the_engine_refuses_makes_no_session(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path, "s.json", [act("a1", "yield")])
    ran = smllm(["run", "dev", "--ref", "GH-x", "--backend", f"scripted:{script}"], project, env)
    assert ran.code == 1 and ran.out == ""
    assert 'error: enter param issueId must match ^GH-[0-9]+$ (got "GH-x")\n' in ran.err
    assert ran.err.endswith("</smllm>\nerror: the engine refused to enter the machine\n")
    assert smllm(["session", "list", "--json"], project, env).out == '{"sessions":[]}\n'


def test_usage_errors_start_nothing(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    good = write_script(tmp_path, "s.json", [act("a1", "yield")])
    bad = tmp_path / "bad.json"
    bad.write_text('{"transmissions": [[{"type": "usr", "text": "hi"}]]}')
    cases = {
        ("dev",): "error: give the model: --model PATH (a local Hugging Face folder) or "
        "--backend scripted:FILE\n",
        ("--backend", f"scripted:{good}"): "error: name a MACHINE to run, or --session KEY to "
        "continue a run\n",
        ("dev", "--backend", "llama:x"): "error: --backend llama:x: the one backend is "
        "scripted:FILE\n",
        ("dev", "--backend", f"scripted:{good}", "--tools", "read,exec"): "error: --tools: no "
        "work tool 'exec' (the tools: read, write, shell)\n",
        ("dev", "--backend", f"scripted:{good}", "--allow", "pytest*"): "error: --allow names "
        "shell commands: grant the shell with --tools shell\n",
        ("dev", "--backend", f"scripted:{good}", "--think", "deep"): "error: --think deep: the "
        "mode is disabled, adaptive or fixed\n",
        ("dev", "--backend", f"scripted:{good}", "--think", "disabled:5"): "error: --think "
        "disabled:5: disabled allows no THINK ids\n",
        ("dev", "--backend", f"scripted:{good}", "--seed", "3"): "error: --seed seeds the "
        "sampler's draws: give a --temperature above 0 with it\n",
        ("nope", "--backend", f"scripted:{good}"): "error: no machine 'nope' is configured here "
        "(machines: dev)\n",
        ("dev", "--backend", f"scripted:{bad}"): f"error: {bad}: transmission 1 holds runtime "
        "blocks; a script holds only what the model says (think, out, act)\n",
        ("dev", "--backend", f"scripted:{tmp_path / 'gone.json'}"): f"error: "
        f"{tmp_path / 'gone.json'}: No such file or directory\n",
        ("--session", "sm-zzzzzz", "--backend", f"scripted:{good}"): "error: no session "
        "sm-zzzzzz (smllm session list shows the sessions)\n",
        ("dev", "--model", str(tmp_path / "none")): f"error: --model {tmp_path / 'none'}: not a "
        "folder (a local Hugging Face model folder)\n",
    }
    for args, message in cases.items():
        ran = smllm(["run", *args], project, env)
        assert (ran.code, ran.out, ran.err) == (2, "", message), args
    assert smllm(["session", "list", "--json"], project, env).out == '{"sessions":[]}\n'


def test_the_live_view_on_a_terminal(
    project: Path, env: dict[str, str], tmp_path: Path, monkeypatch: Any
) -> None:
    import io
    import re

    from smllm.drive import RunOptions, run

    script = write_script(
        tmp_path,
        "s.json",
        [{"type": "out", "text": "I will plan."}, act("a1", "planned", size="huge")],
        [act("a2", "yield", note="later")],
    )
    monkeypatch.chdir(project)
    screen = io.StringIO()
    summary = run(RunOptions(machine="dev", ref="GH-7", script=script), out=screen, live=True)
    assert summary.stop == "yield"
    text = screen.getvalue()
    # the progress line is drawn and wiped (\r, erase to end of line) before each line
    assert "\r\x1b[K  generating: act · " in text
    lines = re.sub(r"\r\x1b\[K  generating: [a-z]+ · [0-9.]+ s", "", text)
    lines = re.sub(r"\r\x1b\[K", "", lines)
    lines = re.sub(r" · [0-9]+ ms · ", " · N ms · ", lines)
    one, two = [(len(t["fed"]), len(t["generated"])) for t in turns_of(summary.to_json())]
    assert lines == (
        "── turn 1 · dev › PLAN\n"
        "  “I will plan.”\n"
        '  ✗ planned {"size": "huge"} → refused (schema_violation: planned: $.size: \'huge\' is '
        "not one of ['small', 'large'])\n"
        f"  fed {one[0]} · generated {one[1]} · N ms · now dev › PLAN\n"
        "── turn 2 · dev › PLAN\n"
        '  ✓ yield {"note": "later"}\n'
        f"  fed {two[0]} · generated {two[1]} · N ms · now dev › PLAN\n"
    )


def test_the_models_text_cant_drive_the_terminal(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Escape sequences in what the model says (a window title, a cleared screen, colours,
    a bidi override) are shown escaped, in the live view and the quiet log alike."""
    script = write_script(
        tmp_path,
        "s.json",
        [
            {"type": "out", "text": "hi \u001b]0;owned\u0007\u001b[2J \u202e"},
            act("a1", "\u001b[31mrm"),
        ],
        [act("a2", "yield")],
    )
    ran = smllm(["run", "dev", "--ref", "GH-8", "--backend", f"scripted:{script}"], project, env)
    assert ran.code == 0, ran.err
    assert "\u001b" not in ran.err and "\u202e" not in ran.err and "\u0007" not in ran.err
    assert "✗ \\x1b[31mrm {} → refused (unknown_capability: no tool '\\x1b[31mrm' is " in ran.err
