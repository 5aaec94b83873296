"""The part of `smllm mcp` that runs on the official `mcp` SDK (1.x low-level server).

Imported only by `serve`, after the reader thread has started: importing the SDK is most of
the server's start-up time. The SDK gets the messages `wire.sort_line` forwards (tools/call,
notifications/initialized and notifications/cancelled) and answers them; its answers go out
through the same `Wire` as the reader's own.
"""

from __future__ import annotations

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .. import __version__
from .texts import AGENT_RULES
from .tool import Caller, UnknownTool
from .wire import INVALID_PARAMS, INVALID_REQUEST, Inbox, Stash, Wire, error_response

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["PROGRESS_SECONDS", "Heartbeat", "build", "run"]

#: how often a running tool call tells a client that asked for progress that it is alive
#: (a client that resets its timeout on progress then waits out a long guard);
#: SMLLM_PROGRESS_SECONDS overrides it (tests)
PROGRESS_SECONDS = 5.0


class Heartbeat:
    """`notifications/progress` for one tool call, every PROGRESS_SECONDS while it runs, from
    a thread of its own (the call holds the event loop's thread)."""

    def __init__(self, wire: Wire, token: str | int) -> None:
        import os
        import threading

        self.wire, self.token = wire, token
        self.every = float(os.environ.get("SMLLM_PROGRESS_SECONDS") or PROGRESS_SECONDS)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="smllm-mcp-progress")
        self.thread.daemon = True
        self.thread.start()

    def _beat(self) -> None:
        count = 0
        while not self.done.wait(self.every):
            count += 1
            self.wire.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {
                        "progressToken": self.token,
                        "progress": count,
                        "message": f"still running ({count * self.every:g} s)",
                    },
                }
            )

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def build(caller: Caller, stash: Stash, wire: Wire) -> Server[Any, Any]:
    """The SDK's low-level server with smllm's one tool's calls (tools/list is answered by
    the reader, from texts.TOOL)."""
    server: Server[Any, Any] = Server("smllm", version=__version__, instructions=AGENT_RULES)

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        # on the event loop's thread, to the end: calls run one at a time, and a command a
        # call runs gets the main thread's signal handling (processes.py)
        request_id = server.request_context.request_id
        meta = request.params.meta
        token = meta.progressToken if meta is not None else None
        beat = Heartbeat(wire, token) if token is not None else None
        try:
            given = stash.take(request.params.arguments)
            caller.client = stash.client
            text, is_error = caller.call(
                request.params.name, given.arguments, given.pairs, given.inside
            )
        except UnknownTool as exc:
            raise McpError(types.ErrorData(code=INVALID_PARAMS, message=str(exc))) from None
        finally:
            if beat is not None:
                beat.stop()
            gave_up = request_id in stash.cancelled or stash.ended or wire.broken
            stash.running.discard(request_id)
            stash.cancelled.discard(request_id)
        if gave_up:
            # the client stopped waiting (a cancel, its own timeout, a closed pipe): what the
            # call did stands, and the session's next reply says so
            caller.gave_up()
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
        return types.ServerResult(types.CallToolResult(content=content, isError=is_error))

    server.request_handlers[types.CallToolRequest] = call_tool
    return server


async def run(wire: Wire, inbox: Inbox, stash: Stash, caller: Caller) -> None:
    """Serve the forwarded messages until the reader's None, then the answers still owed."""
    import asyncio
    import math

    server = build(caller, stash, wire)
    to_sdk, sdk_in = anyio.create_memory_object_stream[SessionMessage | Exception](math.inf)
    sdk_out, from_sdk = anyio.create_memory_object_stream[SessionMessage](math.inf)
    owed = _Owed()
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def deliver() -> None:
        """Each forwarded message into the SDK, in order; at the end of input, the answers
        still owed, then the SDK's input closes. A task, not a loop callback: anyio finds its
        backend through sniffio where that is installed, and sniffio only inside a task."""
        while (message := await arrived.get()) is not None:
            try:
                parsed = types.JSONRPCMessage.model_validate(message)
            except ValidationError:
                if "id" in message:
                    wire.send(error_response(message["id"], INVALID_REQUEST, "Invalid Request"))
                continue
            if "id" in message:
                owed.add()
            to_sdk.send_nowait(SessionMessage(parsed))
        await owed.paid()
        to_sdk.close()

    async def write() -> None:
        async with from_sdk:
            async for out in from_sdk:
                root = out.message.root
                wire.send(out.message.model_dump(by_alias=True, mode="json", exclude_none=True))
                if isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
                    owed.pay()

    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        tg.start_soon(deliver)
        # one hop from the reader thread to the loop per message
        inbox.attach(lambda message: loop.call_soon_threadsafe(arrived.put_nowait, message))
        options = server.create_initialization_options()
        await server.run(sdk_in, sdk_out, options, raise_exceptions=False, stateless=True)
        tg.cancel_scope.cancel()


class _Owed:
    """How many forwarded requests await their answer."""

    def __init__(self) -> None:
        self.count = 0
        self.settled = anyio.Event()

    def add(self) -> None:
        self.count += 1

    def pay(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.settled.set()
            self.settled = anyio.Event()

    async def paid(self) -> None:
        while self.count > 0:
            await self.settled.wait()
