"""One `smllm run`: its options, and the run from start to summary."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TextIO

from ..api.app import App
from ..api.system import SeededHost
from ..smi.runtime import Runtime
from ..smi.stream import Reasoning
from .driver import Driver
from .loop import Run
from .report import Report, Summary
from .start import RunUsage, Target, begin, go_on, save_record
from .transcript import Transcript

__all__ = ["DEFAULT_THINK", "RunOptions", "run"]

#: `--think adaptive:256`
DEFAULT_THINK = Reasoning("adaptive", None, 256)


@dataclass(frozen=True)
class RunOptions:
    """What `smllm run` was asked (checked by the CLI)."""

    machine: str | None = None
    ref: str | None = None
    state: str | None = None
    session: str | None = None
    model: str | None = None
    script: str | None = None
    tools: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    max_turns: int = 100
    max_new_tokens: int = 1024
    reasoning: Reasoning = DEFAULT_THINK
    constrain: bool | None = None
    temperature: float = 0.0
    seed: int | None = None
    shell_timeout: float = 60.0
    config: str | None = None


def run(options: RunOptions, out: TextIO | None = None, live: bool | None = None) -> Summary:
    """Run the model through the machine; the summary (also saved as the session's `run.json`).
    RunUsage: it can't start as asked; RunRefused: the engine refused to enter."""
    host = SeededHost(options.seed) if options.seed is not None else None
    app = App(config=options.config, host=host)
    target = (
        Target(options.machine, options.ref, options.state) if options.machine is not None else None
    )
    if options.session is None and target is None:
        raise RunUsage("name a MACHINE to run, or --session KEY to continue a run")
    work = None
    if options.tools:
        from .work import Work

        folder = app.cwd if options.session is None else _session_folder(app, options.session)
        work = Work(os.path.realpath(folder), options.tools, options.allow, options.shell_timeout)
    driver = Driver(app, "", work)
    runtime = _runtime(options, driver)  # a model that can't load stops the run before it starts
    if options.session is not None:
        go_on(app, options.session, target)
        key = options.session
    else:
        assert target is not None
        key = begin(app, target)
    driver.key = key
    transcript = Transcript(key)
    declarations = work.declarations() if work is not None else []
    the_run = Run(
        app,
        key,
        runtime,
        driver,
        reasoning=options.reasoning,
        max_turns=options.max_turns,
        transcript=transcript,
        report=Report(out, live),
        work_tools=declarations,
        on_end=lambda summary: save_record(key, summary.to_json()),
    )
    return asyncio.run(the_run.go())


def _session_folder(app: App, key: str) -> str:
    session = app.user.session(key)
    if session is None:
        raise RunUsage(f"no session {key} (smllm session list shows the sessions)")
    return session.cwd


def _runtime(options: RunOptions, driver: Driver) -> Runtime:
    from .backends import hf_model_runtime, scripted_runtime

    if options.script is not None:
        return scripted_runtime(options.script, driver, options.max_new_tokens)
    assert options.model is not None
    from ..smi.backends import Sampler

    sampler = Sampler(temperature=options.temperature, seed=options.seed)
    return hf_model_runtime(
        options.model, driver, options.max_new_tokens, options.constrain, sampler
    )
