"""What journaling a stream's chunks costs: a durable stream against a plain streaming loop.

    python -m benchmarks.streams [--chunks 5000] [--paced 150] [--rate 50] [--repeats 5]

Two measures, each in alternating blocks in one process (plain, durable, plain, …),
the headline the median of the repeats:

1. **Per chunk, unpaced**: a generator of ``--chunks`` small text chunks consumed by a
   plain ``for`` loop, and the same generator as ``letitloop.streams.stream`` in a
   journal file (its chunks journaled in batches, handed to the loop through the step's
   thread): CPU time (user + sys, both threads) per chunk, and what the stream adds.
2. **A streaming call at ``--rate`` chunks a second**: the ``openai`` client streaming a
   chat completion of ``--paced`` tokens from tests/openai_server.py's fake server (a
   real HTTP server in this process, SSE), consumed by a plain loop over
   ``client.chat.completions.create(stream=True)`` and by
   ``letitloop.adapters.openai.stream_chat``: wall time of the call, and the
   process's CPU time, side by side. The target (issue 55): the durable loop's wall
   time at most 5 % over the plain one's.

Bias: the fake server runs in this process, so its CPU is in both columns; the
machine is shared (quote the load). Without ``openai``/``uvicorn`` installed the
second measure is left out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ms, publish, table, us
from letitloop import Journal
from letitloop.streams import stream

ROOT = Path(__file__).resolve().parent.parent


def chunks(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"w{i % 1000} "


def cpu() -> float:
    """CPU seconds of the process so far, user and system, every thread's."""
    return time.process_time()


def plain_block(n: int) -> float:
    start = cpu()
    text = []
    for c in chunks(n):
        text.append(c)
    assert len(text) == n
    return (cpu() - start) / n


def durable_block(n: int, folder: Path, i: int) -> float:
    with Journal("bench", path=folder / f"s{i}.db", run="r") as j:
        start = cpu()
        s = stream("answer", chunks, n, journal=j)
        text = [c.text for c in s]
        spent = cpu() - start
    assert len(text) == n
    return spent / n


def per_chunk(n: int, repeats: int) -> tuple[float, float]:
    plain, durable = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            plain.append(plain_block(n))
            durable.append(durable_block(n, Path(tmp), i))
    return statistics.median(plain), statistics.median(durable)


def paced(tokens: int, rate: float, repeats: int) -> list[tuple[str, float, float]] | None:
    try:
        import openai
        import uvicorn  # noqa: F401
    except ImportError:
        return None
    sys.path.insert(0, str(ROOT / "tests"))
    import openai_server

    from letitloop.adapters.openai import stream_chat

    openai_server.LENGTH = tokens
    server = openai_server.FakeOpenAI(pace=1.0 / rate).start()
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    messages = [{"role": "user", "content": "Tell me a story"}]
    walls: dict[str, list[float]] = {"plain": [], "durable": []}
    cpus: dict[str, list[float]] = {"plain": [], "durable": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(repeats):
                for kind in ("plain", "durable") if i % 2 == 0 else ("durable", "plain"):
                    t0, c0 = time.perf_counter(), cpu()
                    if kind == "plain":
                        got = client.chat.completions.create(
                            model="m", messages=messages, stream=True
                        )
                        text = "".join((e.choices[0].delta.content or "") for e in got if e.choices)
                    else:
                        with Journal("bench", path=Path(tmp) / f"p{i}.db", run="r") as j:
                            s = stream_chat(
                                client, "answer", journal=j, model="m", messages=messages
                            )
                            text = "".join(c.text for c in s)
                    walls[kind].append(time.perf_counter() - t0)
                    cpus[kind].append(cpu() - c0)
                    assert len(text.split()) == tokens
    finally:
        server.stop()
    return [
        (kind, statistics.median(walls[kind]), statistics.median(cpus[kind]))
        for kind in ("plain", "durable")
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--paced", type=int, default=150, help="tokens of the paced call")
    parser.add_argument("--rate", type=float, default=50.0, help="chunks a second")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    plain, durable = per_chunk(args.chunks, args.repeats)
    rows = [
        ["plain loop over a generator, CPU per chunk", us(plain)],
        ["durable stream (journal file), CPU per chunk", us(durable)],
        ["added per chunk", us(durable - plain)],
        [
            f"added per chunk, as a share of a chunk's time at {args.rate:g} chunks/s",
            f"{(durable - plain) * args.rate * 100:.3f} %",
        ],
    ]
    body = table(["measure (median of repeats)", "figure"], rows)
    result = paced(args.paced, args.rate, args.repeats)
    if result is not None:
        (_, plain_wall, plain_cpu), (_, durable_wall, durable_cpu) = result
        over = (durable_wall / plain_wall - 1) * 100
        body += "\n\n" + table(
            [f"openai client, {args.paced} chunks at {args.rate:g}/s", "wall", "CPU"],
            [
                [
                    "plain `chat.completions.create(stream=True)` loop",
                    ms(plain_wall),
                    ms(plain_cpu),
                ],
                ["`stream_chat` (journal file)", ms(durable_wall), ms(durable_cpu)],
                ["durable over plain", f"{over:+.2f} %", ms(durable_cpu - plain_cpu)],
            ],
        )
    command = "python -m benchmarks.streams " + " ".join(argv or sys.argv[1:])
    publish("streams", "Streams: journaling a stream's chunks", command.strip(), body)


if __name__ == "__main__":
    main()
