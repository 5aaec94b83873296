"""Running a transition: guards, exit/entry lists, actions, `always` steps (machine-format §3).

Only this module asks the host to run commands and read prompt files. A `Run` collects what
the reply and the history record need: prompts, trace lines, visits, the states passed through.
"""

from __future__ import annotations

from ..jsontext import dumps
from ..machine.model import Action, Guard, Machine, State, Transition
from .host import Host, PromptError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_ALWAYS_STEPS", "Run", "entry_prompts", "prompt_text"]

#: machine-format.md §3 step 4: bound on `always` steps in one call (validation makes it moot).
MAX_ALWAYS_STEPS = 32


def prompt_text(host: Host, action: Action) -> tuple[str | None, str | None]:
    """(text, failure line) of a prompt action."""
    if action.text is not None:
        return action.text, None
    assert action.file is not None
    try:
        text = host.read_prompt(action.file)
    except PromptError as exc:
        return None, f"Prompt failed: {action.file_shown}: {exc.reason}"
    if text is None:
        return None, None if action.optional else f"Prompt failed: {action.file_shown}: not found"
    from ..machine.loader.actions import normalise_prompt

    return normalise_prompt(text), None


def _implied(state: State) -> Action | None:
    if state.implied_prompt is None:
        return None
    return Action(
        "prompt", file=state.implied_prompt, file_shown=f"enter-{state.name}.md", optional=True
    )


def _lists(machine: Machine, state: State, which: str) -> list[tuple[str, tuple[Action, ...]]]:
    """The labelled action lists of entering or exiting `state`, in run order."""
    before = [s for s in machine.shared if s.before and state.name in s.states]
    after = [s for s in machine.shared if not s.before and state.name in s.states]
    own = state.entry if which == "entry" else state.exit
    implied = _implied(state) if which == "entry" else None
    if implied is not None:
        own = (*own, implied)
    out = [
        (f"sharedActions[{s.number}] {which}", s.entry if which == "entry" else s.exit)
        for s in before
    ]
    out.append((f"{state.name} {which}", own))
    out += [
        (f"sharedActions[{s.number}] {which}", s.entry if which == "entry" else s.exit)
        for s in after
    ]
    return [(label, actions) for label, actions in out if actions]


def entry_prompts(machine: Machine, state: State, host: Host) -> tuple[list[str], list[str]]:
    """A view's instructions: the state's entry prompts gathered again, no command run."""
    prompts: list[str] = []
    failures: list[str] = []
    for _label, actions in _lists(machine, state, "entry"):
        for action in actions:
            if action.kind == "prompt":
                text, failure = prompt_text(host, action)
                if text:
                    prompts.append(text)
                if failure:
                    failures.append(failure)
    return prompts, failures


class Run:
    """One call's walk through a machine, with the instance's fields as they change."""

    def __init__(
        self,
        host: Host,
        machine: Machine,
        *,
        session: str,
        instance: str,
        ref: str | None,
        state: str,
        visits: dict[str, int],
        event: str,
        params: dict[str, Any],
        cwd: str,
    ) -> None:
        self.host = host
        self.machine = machine
        self.session = session
        self.instance = instance
        self.ref = ref
        self.state = state
        self.visits = dict(visits)
        self.event = event
        self.params = params
        self.cwd = cwd
        self.prompts: list[str] = []
        self.guards: list[str] = []
        self.failures: list[str] = []
        self.passed: list[str] = []
        self.stopped: list[str] = []

    # -- commands ------------------------------------------------------------------------------

    def env(self, state: str, actions: tuple[str, str] | None) -> dict[str, str]:
        env = {
            "SMLLM_SESSION": self.session,
            "SMLLM_MACHINE": self.machine.id,
            "SMLLM_INSTANCE": self.instance,
            "SMLLM_REF": self.ref or "",
            "SMLLM_EVENT": self.event,
            "SMLLM_STATE": state,
        }
        if actions is not None:
            env["SMLLM_FROM"], env["SMLLM_TO"] = actions
        from ..machine.loader.params import env_name  # only a command's environment needs it

        for name, value in self.params.items():
            env["SMLLM_PARAM_" + env_name(name)] = (
                value if isinstance(value, str) else _compact(value)
            )
        return env

    def guard(self, guard: Guard, source: str) -> bool:
        if guard.kind == "visits":
            count = self.visits.get(guard.state, 0)
            passed = count >= guard.at_least
            self.guards.append(
                f"Guard: visits {guard.state} ≥ {guard.at_least} → "
                f"{'true' if passed else 'false'} (visits: {count})"
            )
            return passed
        assert guard.command is not None
        result = self.host.run_command(
            guard.command, guard.command.cwd or self.cwd, self.env(source, None)
        )
        shown = guard.command.shown()
        if result.ok:
            self.guards.append(f"Guard: command `{shown}` → true")
        else:
            self.guards.append(f"Guard: command `{shown}` → false ({result.detail})")
        return result.ok

    def choose(self, candidates: tuple[Transition, ...], source: str) -> Transition | None:
        for t in candidates:
            if t.guard is None or self.guard(t.guard, source):
                return t
        return None

    def actions(
        self, label: str, actions: tuple[Action, ...], state: str, ends: tuple[str, str]
    ) -> None:
        failed = False
        for index, action in enumerate(actions):
            if action.kind == "prompt":
                text, failure = prompt_text(self.host, action)
                if text:
                    self.prompts.append(text)
                if failure:
                    self.failures.append(failure)
            elif action.kind == "setRef":
                self.ref = self.params.get(self.machine.ref.param, self.ref)
            elif not failed:
                assert action.command is not None
                result = self.host.run_command(
                    action.command, action.command.cwd or self.cwd, self.env(state, ends)
                )
                if not result.ok:
                    failed = True
                    self.failures.append(
                        f"Action failed: {label}[{index}] command: {result.detail}"
                    )

    # -- moves ---------------------------------------------------------------------------------

    def exit(self, state: State, ends: tuple[str, str]) -> None:
        for label, actions in _lists(self.machine, state, "exit"):
            self.actions(label, actions, state.name, ends)

    def enter(self, state: State, ends: tuple[str, str]) -> None:
        self.visits[state.name] = self.visits.get(state.name, 0) + 1
        self.state = state.name
        for label, actions in _lists(self.machine, state, "entry"):
            self.actions(label, actions, state.name, ends)

    def take(self, source: State, transition: Transition, label: str) -> bool:
        """Take `transition` out of `source`; True when it was external (a visit counted)."""
        if transition.target is None or (
            transition.target == source.name and not transition.reenter
        ):
            self.actions(label, transition.actions, source.name, (source.name, source.name))
            return False
        ends = (source.name, transition.target)
        self.exit(source, ends)
        self.actions(label, transition.actions, source.name, ends)
        self.enter(self.machine.states[transition.target], ends)
        return True

    def settle(self) -> None:
        """Follow `always` transitions from the current state (machine-format §3 step 4)."""
        steps = 0
        while True:
            state = self.machine.states[self.state]
            if not state.always:
                return
            if steps >= MAX_ALWAYS_STEPS:
                self.stopped.append(
                    f"Stopped after {MAX_ALWAYS_STEPS} always transitions; check for a loop"
                )
                return
            t = self.choose(state.always, state.name)
            if t is None:
                self.stopped.append(f"No always transition of {state.name} matched; stopped there")
                return
            self.passed.append(state.name)
            self.take(state, t, f"{state.name} always actions")
            steps += 1

    def trace(self) -> tuple[str, ...]:
        return (*self.guards, *self.stopped, *self.failures)


def _compact(value: Any) -> str:
    return dumps(value)
