"""A gadget's function in a unit test, without the host (llmist's
``testGadget``): ``call`` runs it in plain CPython, and what it asks of the
host (logs, costs, progress, updates, questions) is recorded for the test
to read::

    from gadget_sdk import testing
    from app import WordCount

    def test_counts_words():
        call = testing.call(WordCount, {"text": "one two three"})
        assert call.result == "3 words"
        testing.assert_examples(WordCount)

The parameters get the schema's top-level defaults and its ``required``
check, as the host's validation would; the rest of the schema (types,
bounds, patterns) is the host's to enforce, so ``gadget test`` runs the
real component for those. An LLM completion and ``http`` have no host
here.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import (
    AskHuman,
    Answers,
    Cancelled,
    Context,
    Finish,
    GadgetDef,
    InvalidArguments,
    Question,
    Result,
    Text,
)

#: What ``ctx.time_left_ms()`` says in a test call, unless set.
DEFAULT_TIME_LEFT_MS = 30_000


class TestContext(Context):
    """A ``Context`` whose host is this test: every call is recorded."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        time_left_ms: int = DEFAULT_TIME_LEFT_MS,
        cancelled: bool = False,
        answers: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__("gadget_test")
        self._time_left_ms = time_left_ms
        self._cancelled = cancelled
        self._answers = dict(answers or {})
        self.logs: List[Tuple[str, str, Dict[str, Any]]] = []
        self.cost = 0.0
        self.progress_messages: List[str] = []
        self.updates: List[str] = []
        self.asked: List[str] = []

    def log(self, level: str, message: str, **fields: Any) -> None:
        self.logs.append((level, str(message), fields))

    def report_cost(self, usd: float) -> None:
        self.cost += float(usd)

    def progress(self, message: str) -> None:
        self.progress_messages.append(str(message))

    def report_progress(self, done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        shown = f"{done}/{total}" if total is not None else f"{done}"
        self.progress_messages.append(f"{shown}: {message}" if message else shown)

    def update(self, partial: str, details: Any = None) -> None:
        self.updates.append(str(partial))

    def cancelled(self) -> bool:
        return self._cancelled

    def time_left_ms(self) -> int:
        return self._time_left_ms

    def ask(self, **questions: Question) -> Answers:
        """Each question answered from ``answers`` (by key), else declined."""
        answers = Answers()
        for key in questions:
            self.asked.append(key)
            if key in self._answers:
                answers[key] = self._answers[key]
                answers.status[key] = "answered"
            else:
                answers[key] = None
                answers.status[key] = "declined"
        return answers

    def answerable(self) -> set:
        return {"text", "form"} if self._answers else set()


@dataclass
class TestCall:
    """Everything a test call produced. ``result`` is the text the model
    reads (``None`` on an error); ``error`` and ``error_kind``
    (``invalid-arguments``, ``failed``, ``cancelled``) say why it failed."""

    __test__ = False  # not a pytest test class

    result: Optional[str] = None
    finished: bool = False
    details: Any = None
    parts: List[Any] = field(default_factory=list)
    error: Optional[str] = None
    error_kind: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)
    cost: float = 0.0
    logs: List[Tuple[str, str, Dict[str, Any]]] = field(default_factory=list)
    progress: List[str] = field(default_factory=list)
    updates: List[str] = field(default_factory=list)
    asked: List[str] = field(default_factory=list)


def _prepared(g: GadgetDef, params: Dict[str, Any]) -> Dict[str, Any]:
    """``params`` with the schema's top-level defaults, its required
    properties checked."""
    schema = g.schema or {}
    prepared = dict(params)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in prepared and isinstance(prop, dict) and "default" in prop:
            prepared[name] = prop["default"]
    missing = [name for name in schema.get("required", []) if name not in prepared]
    if missing:
        raise InvalidArguments(f"missing required parameter(s): {', '.join(missing)}")
    return prepared


def _text(value: Any) -> Tuple[str, List[Any], Any, Optional[float], bool]:
    """A return value as (model text, parts, details, cost, finished)."""
    if isinstance(value, Result):
        parts = ([value.text] if value.text else []) + list(value.parts)
        details, cost, finished = value.details, value.cost, isinstance(value, Finish)
    elif isinstance(value, (list, tuple)):
        parts, details, cost, finished = list(value), None, None, False
    else:
        parts, details, cost, finished = [value], None, None, False
    texts = [p if isinstance(p, str) else p.text for p in parts if isinstance(p, (str, Text))]
    return "\n\n".join(texts), parts, details, cost, finished


def call(
    g: GadgetDef,
    params: Optional[Dict[str, Any]] = None,
    *,
    time_left_ms: int = DEFAULT_TIME_LEFT_MS,
    cancelled: bool = False,
    answers: Optional[Dict[str, Any]] = None,
) -> TestCall:
    """Runs gadget ``g`` (made with ``@gadget``) on ``params``."""
    if not isinstance(g, GadgetDef):
        raise TypeError(f"testing.call takes a gadget made with @gadget, got {g!r}")
    ctx = TestContext(time_left_ms=time_left_ms, cancelled=cancelled, answers=answers)
    outcome = TestCall()
    try:
        outcome.params = _prepared(g, params or {})
        value = g.function(outcome.params, ctx)
        if isinstance(value, AskHuman):
            answer = ctx.ask_text(str(value.question))
            if answer is None:
                raise RuntimeError("the person declined to answer")
            value = answer
        text, parts, details, cost, finished = _text(value)
        outcome.result, outcome.parts, outcome.details, outcome.finished = text, parts, details, finished
        ctx.cost += cost or 0.0
    except InvalidArguments as e:
        outcome.error, outcome.error_kind = str(e), "invalid-arguments"
    except Cancelled as e:
        outcome.error, outcome.error_kind = str(e) or "cancelled", "cancelled"
    except Exception as e:  # what the model would see as the gadget's failure
        outcome.error, outcome.error_kind = str(e) or type(e).__name__, "failed"
    outcome.cost = ctx.cost
    outcome.logs, outcome.progress, outcome.updates = ctx.logs, ctx.progress_messages, ctx.updates
    outcome.asked = ctx.asked
    return outcome


def assert_examples(g: GadgetDef) -> None:
    """Runs every example of ``g``; raises ``AssertionError`` naming each
    that fails or whose result differs from its output (ends trimmed): what
    the model is shown must be what the gadget does."""
    wrong = []
    for i, (params, output, _comment) in enumerate(g.examples, start=1):
        done = call(g, params)
        if done.error is not None:
            wrong.append(f"example {i} ({params}): {done.error_kind}: {done.error}")
        elif output is not None and done.result.strip() != output.strip():
            wrong.append(f"example {i} ({params}):\n  expected: {output.strip()}\n  got:      {done.result.strip()}")
    if wrong:
        raise AssertionError(f"{len(wrong)} of {g.name}'s examples do not hold:\n" + "\n".join(wrong))
