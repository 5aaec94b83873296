"""`smllm run`: a model drives itself through a machine over SMI (`smllm.drive`), headless.

Exit codes: 0 the run ended as the machine means it to (completed, yielded, paused, or the
model stopped in idle); 1 the engine or a limit ended it (a runaway stop, --max-turns, a full
context, a model that failed, an enter the engine refused); 2 it couldn't start as asked;
130 interrupted (the instance paused: `--session KEY` continues it)."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any

from .common import Exit, config_option, json_state

if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["run", "think_of"]

_TOOLS = ("read", "write", "shell")


def think_of(text: str) -> Any:
    """`--think MODE[:TOKENS]` as the CTRL's reasoning."""
    from ..smi.stream import Reasoning

    mode, _, tokens = text.partition(":")
    if mode not in ("disabled", "adaptive", "fixed"):
        raise Exit(2, f"--think {text}: the mode is disabled, adaptive or fixed")
    if not tokens:
        return Reasoning(mode, None, None)
    if not tokens.isdigit():
        raise Exit(2, f"--think {text}: TOKENS is a whole number of THINK ids")
    if mode == "disabled" and int(tokens) != 0:
        raise Exit(2, f"--think {text}: disabled allows no THINK ids")
    return Reasoning(mode, None, int(tokens))


def _options(args: Namespace) -> Any:
    from ..drive import RunOptions

    if args.model is None and args.backend is None:
        raise Exit(
            2,
            "give the model: --model PATH (a local Hugging Face folder) or --backend scripted:FILE",
        )
    script = None
    if args.backend is not None:
        kind, _, script = args.backend.partition(":")
        if kind != "scripted" or not script:
            raise Exit(2, f"--backend {args.backend}: the one backend is scripted:FILE")
    tools = tuple(t for t in (w.strip() for w in args.tools.split(",")) if t)
    unknown = [t for t in tools if t not in _TOOLS]
    if unknown:
        raise Exit(2, f"--tools: no work tool {unknown[0]!r} (the tools: {', '.join(_TOOLS)})")
    if args.allow and "shell" not in tools:
        raise Exit(2, "--allow names shell commands: grant the shell with --tools shell")
    if args.max_turns < 1 or args.max_new_tokens < 2:
        raise Exit(2, "--max-turns is at least 1 and --max-new-tokens at least 2")
    if args.shell_timeout <= 0 or args.temperature < 0:
        raise Exit(2, "--shell-timeout is positive and --temperature not negative")
    if args.seed is not None and args.temperature == 0:
        raise Exit(2, "--seed seeds the sampler's draws: give a --temperature above 0 with it")
    if args.session is not None and args.state is not None and args.machine is None:
        raise Exit(2, "--state needs a MACHINE")
    return RunOptions(
        machine=args.machine,
        ref=args.ref,
        state=args.state,
        session=args.session,
        model=args.model,
        script=script,
        tools=tuple(dict.fromkeys(tools)),
        allow=tuple(args.allow),
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        reasoning=think_of(args.think),
        constrain={"auto": None, "on": True, "off": False}[args.constrain],
        temperature=args.temperature,
        seed=args.seed,
        shell_timeout=args.shell_timeout,
        config=config_option(args),
    )


def run(args: Namespace) -> int:
    options = _options(args)
    from ..drive import run as drive
    from ..drive.start import RunRefused, RunUsage

    try:
        summary = drive(options)
    except RunUsage as exc:
        raise Exit(2, str(exc)) from None
    except RunRefused as exc:
        sys.stderr.write(exc.text + "\n")
        raise Exit(1, "the engine refused to enter the machine") from None
    except KeyboardInterrupt:  # a second Ctrl-C: at once
        sys.stderr.write("error: interrupted again: stopped at once\n")
        return 130
    if args.json:
        from ..files import emit_json

        emit_json(summary.to_json())
        json_state["emitted"] = True
    else:
        sys.stdout.write(_sentence(summary) + "\n")
    return summary.exit_code


def _sentence(summary: Any) -> str:
    """The run's end as one line, with how to go on where it can."""
    where = f"{summary.machine} › {summary.state}" if summary.machine else "idle"
    t = summary.totals
    line = (
        f"{summary.stop}: {summary.message} ({where}; {t.turns} turns, {t.events} events, "
        f"{t.fed} ids fed, {t.generated} generated)"
    )
    if summary.stop in ("yield", "interrupted", "max-turns", "runaway", "paused"):
        line += (
            f"\ncontinue with: smllm run --session {shlex.quote(summary.session)} and the "
            "same --model or --backend"
        )
    return line
