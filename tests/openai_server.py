"""A fake OpenAI-compatible server that streams (SSE) and counts what it bills.

A real HTTP server (Starlette on uvicorn, in a thread of the test's process:
:class:`FakeOpenAI`), for the official ``openai`` client:

- ``POST /v1/chat/completions`` with ``stream: true``: the answer to the last
  user message, one token per chunk, then the usage. A last message of the
  assistant whose content is a prefix of the answer is continued: only the rest
  is generated. A prompt with ``TOOL`` in it ends with a tool call whose
  arguments come in pieces (until a ``tool`` message brings its result).
- ``POST /v1/responses`` with ``stream: true`` (``background: true``: the
  response is generated on the server whoever listens, and kept), and
  ``GET /v1/responses/{id}?stream=true&starting_after=N`` re-attaches to it:
  the events after sequence number N.

A prompt with ``TOOLS`` ends with two tool calls; a continued assistant message
that has tool calls gets the ones after them. ``stall=N`` in a prompt makes the
first answer to it stall after N pieces (text tokens and tool call pieces), until
the client goes away.

The answer to a prompt is always the same (:func:`answer`). Billing: a chat
completion bills its input tokens (a word each) when asked and each output token
as it is sent, so a client that goes away stops its bill; a background response
bills its whole answer once, however many listen. ``bills`` lists them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

#: Tokens in an answer (a word each).
LENGTH = 40
#: Seconds between two tokens.
PACE = 0.004


def answer(prompt: str) -> list[str]:
    """The tokens of the answer to ``prompt``: always the same."""
    seed = sum(map(ord, prompt)) % 97
    return [f"w{(seed + i) % 1000} " for i in range(LENGTH)]


def words(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) for m in messages)


TOOL_ARGS = ['{"ci', 'ty": "Pa', 'ris", "da', 'ys": 3}']
#: The tool calls an answer ends with: (id, name, its arguments in pieces).
TOOL_CALLS = [
    ("call_1", "get_weather", TOOL_ARGS),
    ("call_2", "get_time", ['{"zo', 'ne": "Europe/', 'Paris"', "}"]),
]


def tool_calls(prompt: str) -> list[tuple[str, str, list[str]]]:
    """The tool calls the answer to ``prompt`` ends with."""
    return TOOL_CALLS if "TOOLS" in prompt else TOOL_CALLS[:1] if "TOOL" in prompt else []


class FakeOpenAI:
    """The server, its bills and its responses; ``start()`` serves on a free port."""

    def __init__(self, pace: float = PACE) -> None:
        self.pace = pace
        self.bills: list[dict[str, Any]] = []
        self.responses: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.stalled: set[str] = set()
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # -- the app -------------------------------------------------------------------------

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, StreamingResponse
        from starlette.routing import Route

        async def chat(request: Any) -> Any:
            body = await request.json()
            self.requests.append({"path": "chat", **body})
            messages = body["messages"]
            prompt = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            tokens = answer(prompt)
            start = 0
            if messages[-1]["role"] == "assistant":
                prefix = messages[-1]["content"]
                while start < len(tokens) and "".join(tokens[: start + 1]) <= prefix:
                    if not prefix.startswith("".join(tokens[: start + 1])):
                        break
                    start += 1
            # A tool call until its result is in (an agent's next turn answers in text).
            tool = "TOOL" in prompt and not any(m["role"] == "tool" for m in messages)
            bill: dict[str, Any] = {"kind": "chat", "input": words(messages), "output": 0}
            self.bills.append(bill)
            cid = f"chatcmpl-{uuid.uuid4().hex[:8]}"

            calls = tool_calls(prompt) if tool else []
            if messages[-1]["role"] == "assistant":  # after the tool calls it made
                calls = calls[len(messages[-1].get("tool_calls") or ()) :]
            stall = None
            if "stall=" in prompt and prompt not in self.stalled:
                self.stalled.add(prompt)
                stall = int(prompt.split("stall=", 1)[1].split()[0])

            def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
                event = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                return f"data: {json.dumps(event)}\n\n"

            async def paced() -> None:
                if stall is not None and bill["output"] == stall:
                    await asyncio.sleep(600)  # until the client goes away
                await asyncio.sleep(self.pace)
                bill["output"] += 1

            async def events() -> Any:
                yield chunk({"role": "assistant", "content": ""})
                for token in tokens[start:]:
                    await paced()
                    yield chunk({"content": token})
                for index, (call_id, name, parts) in enumerate(calls):
                    for i, part in enumerate(parts):
                        await paced()
                        call: dict[str, Any] = {"index": index, "function": {"arguments": part}}
                        if i == 0:
                            call.update(id=call_id, type="function")
                            call["function"]["name"] = name
                        yield chunk({"tool_calls": [call]})
                yield chunk({}, "tool_calls" if tool else "stop")
                usage = {
                    "prompt_tokens": bill["input"],
                    "completion_tokens": bill["output"],
                    "total_tokens": bill["input"] + bill["output"],
                }
                last = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": [],
                    "usage": usage,
                }
                yield f"data: {json.dumps(last)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        async def create_response(request: Any) -> Any:
            body = await request.json()
            self.requests.append({"path": "responses", **body})
            prompt = body["input"] if isinstance(body["input"], str) else words(body["input"])
            rid = f"resp_{uuid.uuid4().hex[:12]}"
            kept: dict[str, Any] = {"events": [], "done": False, "body": body}
            bill: dict[str, Any] = {
                "kind": "response",
                "id": rid,
                "input": len(str(prompt).split()),
                "output": 0,
            }
            self.bills.append(bill)
            if body.get("background"):
                self.responses[rid] = kept
                asyncio.get_running_loop().create_task(self._generate(rid, str(prompt), kept, bill))
                return StreamingResponse(self._listen(kept, -1), media_type="text/event-stream")
            gen = self._generate(rid, str(prompt), kept, bill)
            task = asyncio.get_running_loop().create_task(gen)

            async def inline() -> Any:
                try:
                    async for line in self._listen(kept, -1):
                        yield line
                finally:
                    task.cancel()  # no one listens: generation (and its bill) stops

            return StreamingResponse(inline(), media_type="text/event-stream")

        async def retrieve(request: Any) -> Any:
            rid = request.path_params["rid"]
            kept = self.responses.get(rid)
            if kept is None:
                return JSONResponse({"error": {"message": "no such response"}}, status_code=404)
            after = int(request.query_params.get("starting_after", "-1"))
            self.requests.append({"path": "retrieve", "id": rid, "starting_after": after})
            return StreamingResponse(self._listen(kept, after), media_type="text/event-stream")

        async def billing(request: Any) -> Any:
            return JSONResponse(self.bills)

        return Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/responses", create_response, methods=["POST"]),
                Route("/v1/responses/{rid}", retrieve, methods=["GET"]),
                Route("/billing", billing, methods=["GET"]),
            ]
        )

    async def _generate(
        self, rid: str, prompt: str, kept: dict[str, Any], bill: dict[str, Any]
    ) -> None:
        events: list[dict[str, Any]] = kept["events"]
        model = kept["body"]["model"]

        def response(status: str, usage: Any = None) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "response",
                "created_at": time.time(),
                "status": status,
                "model": model,
                "output": [],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            }

        def add(kind: str, **fields: Any) -> None:
            events.append({"type": kind, "sequence_number": len(events), **fields})

        add("response.created", response=response("in_progress"))
        add("response.in_progress", response=response("in_progress"))
        item = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        add("response.output_item.added", output_index=0, item=item)
        for token in answer(prompt):
            await asyncio.sleep(self.pace)
            bill["output"] += 1
            add(
                "response.output_text.delta",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                delta=token,
                logprobs=[],
            )
        usage = {
            "input_tokens": bill["input"],
            "output_tokens": bill["output"],
            "total_tokens": bill["input"] + bill["output"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        add("response.completed", response=response("completed", usage))
        kept["done"] = True

    async def _listen(self, kept: dict[str, Any], after: int) -> Any:
        """The response's events after sequence number ``after``, as they come, to its end."""
        sent = after + 1
        while True:
            events = kept["events"]
            while sent < len(events):
                event = events[sent]
                sent += 1
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            if kept["done"] and sent >= len(kept["events"]):
                return
            await asyncio.sleep(self.pace / 2)

    # -- serving -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Serve on a free port of 127.0.0.1 in a daemon thread; ``url`` is its ``/v1``."""
        import uvicorn

        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=0, log_level="error", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
