"""``JournaledLM``: a DSPy language model whose every call is a step of the open journal.

DSPy's adapters call an LM as ``lm(messages=..., **kwargs)`` (``acall`` from
async programs) and parse the outputs it returns: a list of strings, or of
dicts (text, tool calls, reasoning). ``JournaledLM`` wraps any ``BaseLM`` and
makes each such call one step, its outputs the step's result (JSON text in the
journal), keyed ``<name>`` then ``<name>#2``, ``#3`` … in call order, with the
call's arguments as the step's fingerprint: a replay hands back the outputs
recorded for the same prompt and settings, never another call's. The wrapped
LM's tokens are recorded once, through ``letitloop.usage``, when the call runs.

The journal wraps ``__call__``/``acall``, not ``forward``/``aforward``: those
return the provider's response object (not plain data; DSPy 3.4 deprecates
them for custom LMs in favour of engines), while the outputs are what the
program consumes and what a replay must give back.
"""

from __future__ import annotations

from contextlib import nullcontext
from contextvars import ContextVar
from functools import partial
from typing import Any

from dspy.clients._deprecation import _adapter_call, adapter_message_call
from dspy.clients.base_lm import BaseLM

from ...errors import StepMismatchError
from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.durable import usage
from ...run.journal import Journal, current_journal
from ..agentcalls import agent_mismatch
from ..reserving import max_tokens_of, reserve_call

#: The ``durable_program`` running in this context (its goal), named in a mismatch's error.
current_program: ContextVar[str | None] = ContextVar("letitloop_dspy_program", default=None)


def open_journal() -> Journal | None:
    """The journal open in this context, or None."""
    journal = current_journal.get()
    return journal if journal is not None and journal.is_open else None


def report_usage(lm: BaseLM, before: int) -> None:
    """Record the tokens of the call ``lm`` just made (its newest history entry), if any."""
    if len(lm.history) <= before:
        return
    spent = lm.history[-1].get("usage") or {}
    tokens_in = spent.get("prompt_tokens", spent.get("input_tokens"))
    tokens_out = spent.get("completion_tokens", spent.get("output_tokens"))
    if isinstance(tokens_in, int) or isinstance(tokens_out, int):
        usage(
            input_tokens=tokens_in if isinstance(tokens_in, int) else None,
            output_tokens=tokens_out if isinstance(tokens_out, int) else None,
            model=str(lm.model) if lm.model else None,
        )


def refused(error: StepMismatchError, name: str, identity: Any) -> StepMismatchError:
    """A call that differs from the one recorded at its place, as a DSPy user reads it: the
    program, the call (the LM's prompt, or the tool and its arguments), the ways out."""
    return agent_mismatch(error, current_program.get() or "DSPy program", name, identity)


def reserve_lm_call(lm: BaseLM, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> None:
    """Reserve the call about to be made on the run's budget, if it has one (settled by
    report_usage)."""
    limit = partial(max_tokens_of, kwargs, lm.kwargs)
    reserve_call((prompt, messages), limit, str(lm.model) if lm.model else None, None)


def from_adapter(journaled: BaseLM, messages: Any) -> bool:
    """Whether DSPy's own adapter made this call (it marks the LM and messages it passes)."""
    origin = _adapter_call.get()
    return messages is not None and origin is not None and origin[0] is journaled


def as_adapter(lm: BaseLM, messages: Any, forwarded: bool) -> Any:
    """Mark the wrapped LM's call as the adapter's when the wrapper's was: DSPy then
    does not warn of ``messages=`` as a user's deprecated call shape."""
    return adapter_message_call(lm, messages) if forwarded else nullcontext()


@named("letitloop:dspy.lm")
def lm_call(
    lm: BaseLM, prompt: Any, messages: Any, kwargs: dict[str, Any], forwarded: bool
) -> list[Any]:
    """One call of the wrapped LM: its outputs, with its tokens reported."""
    reserve_lm_call(lm, prompt, messages, kwargs)
    before = len(lm.history)
    with as_adapter(lm, messages, forwarded):
        outputs: list[Any] = lm(prompt, messages=messages, **kwargs)
    report_usage(lm, before)
    return outputs


@named("letitloop:dspy.lm_async")
async def lm_acall(
    lm: BaseLM, prompt: Any, messages: Any, kwargs: dict[str, Any], forwarded: bool
) -> list[Any]:
    """One async call of the wrapped LM: its outputs, with its tokens reported."""
    reserve_lm_call(lm, prompt, messages, kwargs)
    before = len(lm.history)
    with as_adapter(lm, messages, forwarded):
        outputs: list[Any] = await lm.acall(prompt, messages=messages, **kwargs)
    report_usage(lm, before)
    return outputs


class JournaledLM(BaseLM):
    """Wraps ``lm`` so that, inside ``with Journal(goal):``, each call is a journal step.

    ``dspy.configure(lm=JournaledLM(dspy.LM("openai/gpt-4o-mini")))``. Outside
    a journal each call goes straight to ``lm``. ``name``: the steps' name
    (default ``dspy.lm``). Calls of one name are told apart by their order, so
    one journal's LM calls must not run concurrently (``dspy.Parallel``
    threads): two at once are refused (ConcurrentStepError). The outputs must
    be plain data (strings, numbers, lists, dicts), as DSPy's own LMs return.
    """

    def __init__(self, lm: BaseLM, *, name: str = "dspy.lm") -> None:
        super().__init__(model=lm.model, model_type=lm.model_type, cache=False)
        self.lm = lm
        self.name = name
        self.kwargs = dict(lm.kwargs)

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        journal = open_journal()
        forwarded = from_adapter(self, messages)
        if journal is None:  # not journaled: no step to record usage on
            with as_adapter(self.lm, messages, forwarded):
                return self.lm(prompt, messages=messages, **kwargs)
        try:
            return journal.step(
                self.name,
                lm_call,
                unchecked(self.lm),
                prompt,
                messages,
                kwargs,
                unchecked(forwarded),
            )
        except StepMismatchError as error:
            raise refused(error, error.key or self.name, {"messages": messages or prompt}) from None

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        journal = open_journal()
        forwarded = from_adapter(self, messages)
        if journal is None:  # not journaled: no step to record usage on
            with as_adapter(self.lm, messages, forwarded):
                return await self.lm.acall(prompt, messages=messages, **kwargs)
        try:
            return await journal.async_step(
                self.name,
                lm_acall,
                unchecked(self.lm),
                prompt,
                messages,
                kwargs,
                unchecked(forwarded),
            )
        except StepMismatchError as error:
            raise refused(error, error.key or self.name, {"messages": messages or prompt}) from None
