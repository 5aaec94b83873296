"""`smllm harness install|status|hook` (cli-and-harnesses.md §5, §6): the CLI's side only;
the work is in smllm.harness."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["harness"]


def harness(args: Namespace) -> int:
    if args.action == "hook":
        # the client runs this on every stop and prompt: nothing here but the hook's own module
        from ..harness.hook import run_hook

        return run_hook(args.name, args.hook)
    from ..harness.install.command import install_or_status

    return install_or_status(args)
