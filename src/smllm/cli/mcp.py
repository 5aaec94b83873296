"""`smllm mcp` (cli-and-harnesses.md §4): the CLI's side only; the server is smllm.mcp."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["mcp"]


def mcp(args: Namespace) -> int:
    from ..mcp.server import serve
    from .common import config_option

    return serve(config_option(args))
