"""`smllm run --model PATH` with tiny real models (issue 22): a Mamba and a GPT-2 (transformers,
CPU torch, hidden 32, 2 layers) saved as Hugging Face folders with the SMI tokens, run by
`smllm run --model` for 20 turns under each think mode, with constrained decoding on and off: no
error, the THINK budget never exceeded (no THINK at all when disabled), with constrained
decoding every ACT a declared tool's well-formed call, and the ids fed per turn flat (a small
constant, against a conversation that grows). The 20-turn models lean towards `planned` by a
fixed logit bias in their weights (tests/helpers/run_models.py says how and why); plain random
models run too, and end the way the engine decides. A folder that can't serve as `--model`
ends the run before it starts: exit 2, one `error:` line, no session.

Each 20-turn run has its own project and state folders and is made once per module. Three go
through the real CLI, in a process of their own each, one after the other in the background as
the module begins (at least one per family); the nine others run in this process
(`smllm.drive.run`, the CLI's own call) meanwhile, sparing each the ~3 s of importing torch and
transformers: on two cores the file takes about a minute."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from conftest import Ran, smllm
from helpers.run_models import FAMILIES, LEANS_TO, save_folder
from helpers.smi_runtime import think_payload, tiny_model
from helpers.storerows import StoreRows

from smllm.cli.demo import copy_example
from smllm.smi.tokens import Kind, TokenIds
from smllm.smi.vocab.install import find_tokens

from .conftest import build_installed

TURNS = 20
BUDGET = 8
THINKS = ("disabled", f"fixed:{BUDGET}", f"adaptive:{BUDGET}")
#: constrained: a THINK (9 ids), one ACT (~60) and `<|eot|>` fit with room; unconstrained,
#: the ACT text runs to the limit every turn, so a smaller one keeps the runs short
MAX_NEW = {"on": 128, "off": 64}
SEED = 7
CASES = [(f, t, c) for f in FAMILIES for c in ("on", "off") for t in THINKS]
#: the runs through the real CLI (Mamba's constrained ones are the longest: it is fed one id at
#: a time), last in the tests' order so that the in-process runs go on while they run
CLI_CASES = [("mamba", THINKS[2], "on"), ("mamba", THINKS[1], "on"), ("gpt2", THINKS[2], "on")]
CASES = [c for c in CASES if c not in CLI_CASES] + CLI_CASES
#: how a run may end when nothing failed (summary stop), and its exit code
ENDINGS = {"complete": 0, "yield": 0, "paused": 0, "idle": 0, "runaway": 1, "max-turns": 1}


def case_id(case: tuple[str, str, str]) -> str:
    family, think, constrain = case
    return f"{family}-{think.replace(':', '')}-constrain-{constrain}"


@dataclass(frozen=True)
class Done:
    """One finished run: the process's answer, its JSON summary and its transcript lines."""

    ran: Ran
    summary: dict[str, Any]
    turns: list[dict[str, Any]]
    project: Path


def isolated(base: Path) -> dict[str, str]:
    """The environment of a run of its own (conftest's `env`, for a module-scoped run): XDG
    folders under `base`, offline, one torch thread (two runs share two cores)."""
    values = {
        "XDG_STATE_HOME": str(base / "xdg-state"),
        "XDG_CACHE_HOME": str(base / "xdg-cache"),
        "XDG_CONFIG_HOME": str(base / "xdg-config"),
        "HOME": str(base / "home"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
    return {**env, **values}


def arguments(model: Path, case: tuple[str, str, str]) -> list[str]:
    """`smllm run` with `model` for `case`."""
    _, think, constrain = case
    args = ["run", "dev", "--ref", "GH-1", "--model", str(model), "--think", think]
    args += ["--constrain", constrain, "--max-turns", str(TURNS)]
    args += ["--max-new-tokens", str(MAX_NEW[constrain]), "--temperature", "1", "--seed"]
    return [*args, str(SEED), "--json"]


def run_case(base: Path, model: Path, case: tuple[str, str, str], cli: bool) -> Done:
    """`case` run in a fresh copy of the example project under `base`: through the real CLI,
    or here, by the call the CLI makes with the options it parses from the same arguments."""
    project = base / "project"
    project.mkdir()
    copy_example(str(project))
    env = isolated(base)
    if cli:
        ran = smllm(arguments(model, case), project, env, timeout=600)
    else:
        from smllm.cli.parser import parse
        from smllm.cli.run import _options
        from smllm.drive import run

        options = _options(parse(arguments(model, case)))
        threads = torch.get_num_threads()
        # one torch thread, as the CLI runs get: two threads' barriers on two busy cores make
        # a tiny model's steps several times slower
        torch.set_num_threads(1)
        try:
            with pytest.MonkeyPatch.context() as mp:
                for name, value in env.items():
                    mp.setenv(name, value)
                mp.chdir(project)
                summary = run(options, out=io.StringIO(), live=False)
        finally:
            torch.set_num_threads(threads)
        ran = Ran(summary.exit_code, json.dumps(summary.to_json()), "")
    summary_json = json.loads(ran.out)
    with open(summary_json["transcript"], encoding="utf-8") as f:
        turns = [json.loads(line) for line in f]
    return Done(ran, summary_json, turns, project)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A leaning model folder per family (helpers/run_models.py)."""
    base = tmp_path_factory.mktemp("models")
    return {family: save_folder(base / family, family) for family in FAMILIES}


@pytest.fixture(scope="module")
def ids(folders: dict[str, Path]) -> TokenIds:
    """The SMI ids of the saved tokenizer (both folders hold the same one)."""
    return find_tokens(transformers.AutoTokenizer.from_pretrained(str(folders["mamba"])))


class Runs:
    """The module's runs: the CLI ones started in the background at once, the others made
    here on first use (in the main thread: a run takes SIGINT for itself)."""

    def __init__(
        self, folders: dict[str, Path], factory: pytest.TempPathFactory, pool: ThreadPoolExecutor
    ) -> None:
        self.folders = folders
        self.factory = factory
        self.cli: dict[tuple[str, str, str], Future[Done]] = {
            case: pool.submit(run_case, self._base(case), folders[case[0]], case, True)
            for case in CLI_CASES
        }
        self.here: dict[tuple[str, str, str], Done] = {}

    def _base(self, case: tuple[str, str, str]) -> Path:
        return self.factory.mktemp(case_id(case))

    def __getitem__(self, case: tuple[str, str, str]) -> Done:
        if case in self.cli:
            return self.cli[case].result()
        if case not in self.here:
            self.here[case] = run_case(self._base(case), self.folders[case[0]], case, False)
        return self.here[case]


@pytest.fixture(scope="module")
def runs(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Every case's run (`Runs`)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield Runs(folders, tmp_path_factory, pool)


def declared(turn: dict[str, Any]) -> list[str] | None:
    """The tool names of the CAPS a runtime transmission carries (None: no CAPS)."""
    for block in turn["runtime"]:
        if block["type"] == "caps":
            return [tool["name"] for tool in json.loads(block["text"])["tools"]]
    return None


def acts_of(turn: dict[str, Any]) -> list[str]:
    """The payload texts of the model's ACT blocks in a turn."""
    return [b.get("text", json.dumps(b.get("json"))) for b in turn["model"] if b["type"] == "act"]


def answers(turn: dict[str, Any]) -> list[dict[str, Any]]:
    """The OBS blocks of a runtime transmission that answer an ACT."""
    found = [json.loads(b["text"]) for b in turn["runtime"] if b["type"] == "obs"]
    return [obs for obs in found if isinstance(obs, dict) and "caused_by" in obs]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_twenty_turns_end_at_the_turn_limit_without_error(
    runs: Runs, case: tuple[str, str, str]
) -> None:
    done = runs[case]
    assert "Traceback" not in done.ran.err and "error:" not in done.ran.err, done.ran.err
    assert done.ran.code == 1, done.ran  # --max-turns is a limit: exit 1
    s = done.summary
    assert (s["stop"], s["turns"], s["machine"], s["state"]) == ("max-turns", TURNS, "dev", "PLAN")
    assert [t["turn"] for t in done.turns] == list(range(1, TURNS + 1))
    assert all("note" not in t and t["model"] for t in done.turns)  # every turn answered
    assert s["tokens"] == {
        "fed": sum(len(t["fed"]) for t in done.turns),
        "generated": sum(len(t["generated"]) for t in done.turns),
    }


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_think_budget_is_never_exceeded(
    runs: Runs, case: tuple[str, str, str], ids: TokenIds
) -> None:
    done = runs[case]
    thought = [think_payload(t["generated"], ids) for t in done.turns]
    if case[1] == "disabled":
        assert all(ids[Kind.THINK] not in t["generated"] for t in done.turns)
        assert all(b["type"] != "think" for t in done.turns for b in t["model"])
    else:
        # the model leans to think on and on: the budget is what ends each THINK
        assert max(thought) == BUDGET, thought
        assert sum(n == BUDGET for n in thought) >= 3, thought


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_acts_with_and_without_constrained_decoding(runs: Runs, case: tuple[str, str, str]) -> None:
    done = runs[case]
    tools = declared(done.turns[0])
    assert tools == [LEANS_TO, "yield", "pause", "unmatched"]
    made = [acts_of(t) for t in done.turns]
    assert all(made), made  # an ACT every turn: never a stop, so never a runaway
    obs = [answers(t) for t in done.turns[1:]]  # turn k+1 answers turn k's ACTs
    assert [len(o) for o in obs] == [len(a) for a in made[:-1]]
    s = done.summary
    if case[2] == "on":
        for payload in (p for turn in made for p in turn):
            call = json.loads(payload)  # each one the seed's tool call, of a declared tool
            assert list(call) == ["id", "type", "name", "arguments"], call
            assert call["type"] == "tool" and call["name"] in tools, call
        assert all(o["ok"] is True for turn in obs for o in turn), obs
        count = sum(map(len, made))
        assert (s["acts"], s["events"]) == ({"accepted": count, "refused": 0}, TURNS)
    else:
        # free text after <|act|> is never a call: each is refused with an error OBS, and no
        # event reaches the engine
        kinds = {o["error"]["type"] for turn in obs for o in turn if not o["ok"]}
        assert all(o["ok"] is False for turn in obs for o in turn) and kinds, obs
        assert kinds <= {"malformed_action", "unknown_capability"}, kinds
        assert (s["acts"]["accepted"], s["events"]) == (0, 0)
    history = StoreRows.of(done.project).instance_rows("dev", "GH-1")
    assert len(history) == 1 and history[0]["state"] == "PLAN"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_ids_fed_per_turn_stay_flat(runs: Runs, case: tuple[str, str, str]) -> None:
    done = runs[case]
    fed = [len(t["fed"]) for t in done.turns]
    # the offer never changes in PLAN: CAPS go once, then each turn feeds its OBS only
    assert [declared(t) is not None for t in done.turns] == [True] + [False] * (TURNS - 1)
    later = fed[1:]
    assert max(later) - min(later) <= 8, fed  # the visit count's digits, an id's length
    assert fed[0] > 3 * max(later), fed  # turn 1 carries CTRL, SYS and CAPS
    # re-encoding the conversation at turn 20 would feed every id so far
    whole = sum(fed) + sum(len(t["generated"]) for t in done.turns[:-1])
    assert whole >= 10 * fed[-1], (whole, fed)


# -- plain random models: they end as the engine decides ---------------------------------------


@pytest.mark.parametrize("constrain", [True, False], ids=["constrain-on", "constrain-off"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_random_model_ends_the_run_the_engine_s_way(
    family: str,
    constrain: bool,
    project: Path,
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A random model (no leaning) stops without an ACT, or fires what CAPS offer (`pause`,
    `yield`, …): a normal ending within the turns, never a model error."""
    from smllm.drive import run
    from smllm.drive.main import RunOptions
    from smllm.smi.stream import Reasoning

    installed = build_installed("bytelevel")
    folder = tmp_path / "random"
    installed.tokenizer.save_pretrained(str(folder))
    tiny_model(family, vocab=len(installed.tokenizer), positions=8192).save_pretrained(str(folder))
    monkeypatch.chdir(project)
    options = RunOptions(
        machine="dev",
        ref="GH-1",
        model=str(folder),
        max_turns=TURNS,
        max_new_tokens=32,
        reasoning=Reasoning("adaptive", None, BUDGET),
        constrain=constrain,
        temperature=1.0,
        seed=SEED,
    )
    summary = run(options, out=io.StringIO(), live=False)
    assert summary.stop in ENDINGS and summary.exit_code == ENDINGS[summary.stop], summary
    assert summary.transcript is not None
    with open(summary.transcript, encoding="utf-8") as f:
        turns = [json.loads(line) for line in f]
    assert len(turns) == summary.totals.turns >= 1
    assert all("note" not in t for t in turns)
    assert all(think_payload(t["generated"], installed.ids) <= BUDGET for t in turns)


# -- folders that can't serve: exit 2 before any session ---------------------------------------


def bad_folder(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """A folder of `kind` that isn't a usable model, and the start of the message it gets."""
    folder = tmp_path / kind
    if kind == "missing":
        return folder, "not a folder (a local Hugging Face model folder)"
    if kind == "empty":
        folder.mkdir()
        return folder, "no config.json in it, so not a Hugging Face model folder"
    if kind == "no-smi-tokens":
        save_folder(folder, "gpt2", smi=False)
        return folder, "the SMI tokens are not installed: <|ctrl|>, <|sys|>"
    if kind == "not-grown":
        save_folder(folder, "gpt2", grown=False)
        return folder, "the model has 701 embedding rows but its tokenizer 733 ids"
    save_folder(folder, "mamba")  # "broken-weights"
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    return folder, "transformers can't load a model from it (SafetensorError: "


@pytest.mark.parametrize(
    "kind", ["missing", "empty", "no-smi-tokens", "not-grown", "broken-weights"]
)
def test_a_folder_that_is_no_usable_model_stops_before_the_session(
    kind: str, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    folder, said = bad_folder(kind, tmp_path)
    ran = smllm(["run", "dev", "--ref", "GH-1", "--model", str(folder), "--json"], project, env)
    assert ran.code == 2 and ran.out == "", ran
    lines = ran.err.strip().splitlines()
    assert lines[-1].startswith(f"error: --model {folder}: {said}"), ran.err
    assert "Traceback" not in ran.err
    if kind == "no-smi-tokens":  # says how to get a folder with them
        assert lines[-1].endswith(f"smllm smi install {folder} -o NEW, then --model NEW"), ran.err
    listed = smllm(["session", "list", "--json"], project, env)
    assert json.loads(listed.out) == {"sessions": []}
    assert StoreRows.of(project).count() == 0


# -- a seeded run repeats ------------------------------------------------------------------------


def test_a_seeded_run_repeats_in_a_fresh_state_and_draws_anew_in_a_used_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model reads the session key and the instance id, so `--seed` draws them too: the
    same seed in fresh state folders gives the same ids and the same generated ids each turn;
    run again where the first run's session exists, the same seed draws other ids (the key is
    taken) and the run goes on as a session of its own, on the issue's instance."""
    from smllm.drive import run
    from smllm.drive.main import RunOptions
    from smllm.smi.stream import Reasoning

    installed = build_installed("bytelevel")
    folder = tmp_path / "random"
    installed.tokenizer.save_pretrained(str(folder))
    tiny_model("gpt2", vocab=len(installed.tokenizer), positions=8192).save_pretrained(str(folder))
    options = RunOptions(
        machine="dev",
        ref="GH-1",
        model=str(folder),
        max_turns=4,
        max_new_tokens=32,
        reasoning=Reasoning("adaptive", None, BUDGET),
        temperature=1.0,
        seed=SEED,
    )

    def seeded_run(base: Path) -> tuple[str, str | None, list[list[int]]]:
        project = base / "project"
        if not project.exists():
            project.mkdir(parents=True)
            copy_example(str(project))
        for name, value in isolated(base).items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(project)
        summary = run(options, out=io.StringIO(), live=False).to_json()
        with open(summary["transcript"], encoding="utf-8") as f:
            generated = [json.loads(line)["generated"] for line in f]
        return summary["session"], summary.get("instance"), generated

    first = seeded_run(tmp_path / "one")
    assert first == seeded_run(tmp_path / "two")
    again = seeded_run(tmp_path / "one")
    assert again[0] != first[0] and again[0].startswith("sm-") and len(again[0]) == 9
    assert again[1] == first[1]  # the instance, continued by the new session
