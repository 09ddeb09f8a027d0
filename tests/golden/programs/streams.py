"""A run with two streamed steps: one complete, one SIGKILLed mid-stream (issue 55).

    python streams.py DB SIDE kill   # writes: intro streamed whole, story killed after 12 chunks
    python streams.py DB SIDE ""     # resumes: intro replayed, story re-attached

Each call of a source writes ``call NAME from N`` to the side file. Keep this file as it
is: its functions' names and its steps' arguments are what the golden file recorded.
"""

import os
import signal
import sys

from letitloop import Journal
from letitloop.streams import Piece, Recovery, calls, stream

DB, SIDE, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
calls.FLUSH_EVERY = 4  # small batches: the kill leaves a prefix with its last position
WORDS = [f"word{i} " for i in range(40)]


def note(line):
    with open(SIDE, "a") as f:
        f.write(line + "\n")


def generate(name, start=0):
    note(f"call {name} from {start}")
    if start == 0:
        yield Piece.state(0, generation=f"gen-{name}")
    for i in range(start, len(WORDS)):
        yield Piece.text(WORDS[i], mark=i + 1)
    yield Piece.usage(input_tokens=3, output_tokens=len(WORDS) - start)


def reattach(resume, name):
    if resume.state.get("generation") != f"gen-{name}":
        return None
    return Recovery("reattach", generate(name, int(resume.mark)))


with Journal("stories", path=DB, run="golden") as j:
    intro = stream("intro", generate, "intro", recover=reattach, journal=j).result
    story = stream("story", generate, "story", recover=reattach, journal=j)
    for n, _chunk in enumerate(story, 1):
        if MODE == "kill" and n == 12:
            os.kill(os.getpid(), signal.SIGKILL)
    result = story.result
    print(len(intro.text), result.text == "".join(WORDS), result.recoveries, result.chunks)
