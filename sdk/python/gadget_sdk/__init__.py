"""gadget-sdk for Python: write gadgets for gadget-host as WebAssembly components.

A gadget is a function with a description, a JSON Schema for its parameters
(a dict) and examples. It gets the validated parameters as a dict and a
``Context`` (logging, cost reports, progress, the abort signal, questions for
a person or the MCP client), and returns a string, a part (``Image``,
``Audio``, ``Embedded``, ``Link``), a list of parts, or a ``Result`` (parts
plus structured JSON, cost and details), or ``Finish``.
Raising signals an error the model sees: ``InvalidArguments`` for unusable
arguments, ``Cancelled`` after the abort signal, anything else as a failure.

    from gadget_sdk import gadget, Context, InvalidArguments, export

    @gadget(
        description="Counts the words of a text.",
        schema={"type": "object",
                "properties": {"text": {"type": "string", "description": "The text."}},
                "required": ["text"]},
        examples=[({"text": "one two"}, "2")],
    )
    def WordCount(params: dict, ctx: Context) -> str:
        return str(len(params["text"].split()))

    Gadget = export(WordCount)   # the component's export, found by componentize-py

Build with ``gadget build DIR`` (componentize-py 0.25.1 under the hood),
against contract ``gadget:plugin@0.3.0``. ``export`` can also serve
resources and prompts (``Resource``, ``Template``, ``Prompt``).
The host validates parameters against the schema (after filling in defaults)
before ``invoke``, so a gadget can trust their shape.
"""

import json
import traceback

# The standard library modules a gadget most often needs, some of which other
# modules import lazily (`Counter.most_common` imports `heapq` on first use).
# The component holds only modules imported while it was built (see below),
# so they are imported here; import anything else your gadget uses at the top
# of your app module.
import collections  # noqa: F401
import datetime  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import re  # noqa: F401
import string  # noqa: F401
import textwrap  # noqa: F401
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

# The bindings componentize-py generates from the WIT. They are imported here,
# at module level, because componentize-py snapshots the app after importing
# it and keeps only the modules imported by then: a module first imported
# during a call is not found ("No module named ...").
try:
    from componentize_py_types import Err
    from componentize_py_types import Ok as _Ok
    from wit_world.imports import host as _host
    from wit_world.imports import gadget_plugin_types as _types
    from wit_world.imports import outgoing_handler as _outgoing
    from wit_world.imports import streams as _streams
    from wit_world.imports import wasi_http_types as _http
    from wit_world.imports import llm as _llm
    from wit_world.imports import ask as _ask
    from wit_world.exports import catalog as _catalog
except ImportError:  # outside a component build (docs, type checks)
    Err = _Ok = _host = _types = _outgoing = _streams = _http = _llm = _ask = _catalog = None

__all__ = [
    "gadget",
    "export",
    "Context",
    "Result",
    "Finish",
    "AskHuman",
    "Text",
    "Image",
    "Audio",
    "Embedded",
    "Link",
    "Question",
    "Answers",
    "AskError",
    "Resource",
    "Template",
    "Prompt",
    "Argument",
    "InvalidArguments",
    "Cancelled",
    "GadgetDef",
    "config",
    "url_param",
    "path_param",
    "http",
    "HttpError",
    "HttpDenied",
    "Response",
    "complete",
    "Completion",
    "LlmError",
]


def url_param(description: str = "", **schema: Any) -> dict:
    """The schema of a parameter that is a URL: ``{"type": "string",
    "format": "uri"}`` with ``description`` and any other ``schema`` keys.
    The format tells the host what the value means, so the operator's rules
    on it match its normal form too (``HTTP://x`` is ``http://x``)."""
    return {"type": "string", "format": "uri", **({"description": description} if description else {}), **schema}


def path_param(description: str = "", **schema: Any) -> dict:
    """The schema of a parameter that is a file path (``"format": "path"``):
    the operator's rules on it match its cleaned form too (``/out/./a`` is
    ``/out/a``)."""
    return {"type": "string", "format": "path", **({"description": description} if description else {}), **schema}


def config(key: str) -> Optional[str]:
    """A configuration value the operator granted this plugin (its manifest asks
    for the key under ``[permissions] config``), or None. Granted values are the
    instance's environment variables, so ``os.environ`` has them too; nothing
    else of the host's environment is there. Secret values are redacted from
    everything the gadget sends back."""
    import os

    return os.environ.get(key)


class HttpError(Exception):
    """An HTTP request failed (connection, timeout, a body over the host's cap)."""


class HttpDenied(HttpError):
    """The host refused the request: the origin is not granted to this plugin (the
    call's log names the grant that would allow it)."""


@dataclass
class Response:
    """An HTTP response, read whole (the host caps its size)."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> Optional[str]:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


def _http_failure(code: Any) -> HttpError:
    name = type(code).__name__.replace("ErrorCode_", "")
    if name == "HttpRequestDenied":
        return HttpDenied(
            "the host refused the request (the call's log says why and what would allow it: an "
            "origin or address not granted, the call's request cap, or a secret's placeholder "
            "where the secret may not go)"
        )
    if name == "HttpResponseBodySize":
        return HttpError(f"the response body is over the host's {code.value}-byte limit")
    if name == "ConnectionTimeout":
        return HttpError("timed out (the call's deadline, or the connection)")
    return HttpError(f"request failed: {name}")


class http:
    """Outbound HTTP over the standard wasi:http interface. The host sends each
    request, only to the origins the operator granted this plugin (its manifest
    asks under ``[permissions] http``); redirects come back as they are.

        page = http.get("https://api.example.com/v1/items")
        if page.status == 200:
            items = page.json()
    """

    @staticmethod
    def get(url: str, headers: Optional[Dict[str, str]] = None) -> Response:
        return http.request("GET", url, headers)

    @staticmethod
    def request(
        method: str,
        url: str,
        headers: Optional[Dict[str, str]] = None,
        body: Optional[bytes] = None,
    ) -> Response:
        if "://" not in url:
            raise HttpError(f"invalid URL {url!r}: no scheme")
        scheme, rest = url.split("://", 1)
        cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0] or [len(rest)])
        authority, path = rest[:cut], rest[cut:] or "/"
        if path.startswith("?"):
            path = "/" + path
        fields = _http.Fields.from_list([(k, v.encode()) for k, v in (headers or {}).items()])
        request = _http.OutgoingRequest(fields)
        methods = {
            "GET": _http.Method_Get(),
            "HEAD": _http.Method_Head(),
            "POST": _http.Method_Post(),
            "PUT": _http.Method_Put(),
            "DELETE": _http.Method_Delete(),
            "PATCH": _http.Method_Patch(),
            "OPTIONS": _http.Method_Options(),
        }
        request.set_method(methods.get(method.upper(), _http.Method_Other(method.upper())))
        if scheme.lower() == "https":
            request.set_scheme(_http.Scheme_Https())
        elif scheme.lower() == "http":
            request.set_scheme(_http.Scheme_Http())
        else:
            raise HttpError(f"invalid URL {url!r}: scheme {scheme!r}")
        request.set_authority(authority)
        request.set_path_with_query(path)
        outgoing_body = request.body()
        try:
            future = _outgoing.handle(request, None)
        except Err as error:
            raise _http_failure(error.value)
        # A request the host refuses is dropped at once, so writing its
        # body fails (the stream is closed): the answer below says why.
        if body:
            stream = outgoing_body.write()
            try:
                for at in range(0, len(body), 4096):
                    stream.blocking_write_and_flush(body[at : at + 4096])
            except Err:
                pass
            stream.__exit__(None, None, None)
        try:
            _http.OutgoingBody.finish(outgoing_body, None)
        except Err:
            pass
        future.subscribe().block()
        answer = future.get()
        if answer is None or isinstance(answer, Err):
            raise HttpError("no response")
        inner = answer.value
        if isinstance(inner, Err):
            raise _http_failure(inner.value)
        response = inner.value
        status = response.status()
        pairs = [(k.lower(), v.decode("utf-8", errors="replace")) for k, v in response.headers().entries()]
        incoming = response.consume()
        stream = incoming.stream()
        chunks = []
        while True:
            try:
                chunks.append(stream.blocking_read(65536))
            except Err as error:
                if isinstance(error.value, _streams.StreamError_Closed):
                    break
                code = _http.http_error_code(error.value.value)
                raise _http_failure(code) if code is not None else HttpError("reading the body failed")
        return Response(status=status, headers=pairs, body=b"".join(chunks))


@dataclass
class Completion:
    """The host's LLM's answer; ``cost`` (USD) is already added to the call's cost."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float


class LlmError(Exception):
    """No completion: denied (not granted, or not this model), the call's budget
    exceeded, or the provider failed; the message says which and why."""


def complete(
    prompt: Union[str, Sequence[Tuple[str, str]]],
    *,
    system: Optional[str] = None,
    model: Optional[str] = None,
    max_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
) -> Completion:
    """One completion from the host's LLM. ``prompt`` is the user's text, or a
    list of ``(role, text)`` pairs (roles ``system``, ``user``, ``assistant``).
    The manifest asks with ``[permissions] llm = true``; the operator grants
    models and a per-call budget. Raises ``LlmError``, or ``Cancelled`` when the
    call's deadline passes during the completion."""
    roles = {"system": _llm.Role.SYSTEM, "user": _llm.Role.USER, "assistant": _llm.Role.ASSISTANT}
    pairs = [("user", prompt)] if isinstance(prompt, str) else list(prompt)
    if system is not None:
        pairs.insert(0, ("system", system))
    messages = []
    for role, text in pairs:
        if role not in roles:
            raise ValueError(f"message role {role!r} is not system, user or assistant")
        messages.append(_llm.Message(role=roles[role], content=str(text)))
    request = _llm.CompletionRequest(
        messages=messages, model=model, max_tokens=max_tokens, temperature=temperature
    )
    try:
        answer = _llm.complete(request)
    except Err as error:
        failure = error.value
        if isinstance(failure, _llm.LlmError_Deadline):
            raise Cancelled("the call's deadline passed during a completion") from None
        what = {
            _llm.LlmError_Denied: "LLM denied",
            _llm.LlmError_BudgetExceeded: "LLM budget exceeded",
            _llm.LlmError_Provider: "LLM provider failed",
        }.get(type(failure), "LLM failed")
        raise LlmError(f"{what}: {failure.value}") from None
    return Completion(
        text=answer.text,
        model=answer.model,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        cost=answer.cost,
    )


class InvalidArguments(Exception):
    """The parameters are well-formed but unusable; the message tells the model what to change."""


class Cancelled(Exception):
    """The gadget stopped because the abort signal went up (``ctx.cancelled()``)."""


@dataclass
class Text:
    """A text part of a result."""

    text: str


@dataclass
class Image:
    """An image part: its bytes and MIME type."""

    data: bytes
    mime_type: str = "image/png"


@dataclass
class Audio:
    """A sound part: its bytes and MIME type."""

    data: bytes
    mime_type: str = "audio/wav"


@dataclass
class Embedded:
    """A resource's contents embedded in a result (or returned by a read):
    ``text`` or ``blob``, named by its URI."""

    uri: str
    text: Optional[str] = None
    blob: Optional[bytes] = None
    mime_type: Optional[str] = None


@dataclass
class Link:
    """A pointer to a resource the client may read instead of its contents."""

    uri: str
    name: str
    title: Optional[str] = None
    description: Optional[str] = None
    mime_type: Optional[str] = None


Part = Union[str, Text, Image, Audio, Embedded, Link]


@dataclass
class Result:
    """A result: text and other parts (in order: the text first), the same
    result as JSON for clients that read structured output, a cost (USD) and
    details for people."""

    text: str = ""
    cost: Optional[float] = None
    details: Any = None
    parts: Sequence[Part] = ()
    structured: Any = None


@dataclass
class Finish(Result):
    """The task is complete: the agent loop ends after this response."""


@dataclass
class AskHuman:
    """A question for a person; their answer becomes the call's result.
    (Contract 0.3.0 asks through ``ctx.ask``, which returns the answer to the
    running gadget; this keeps the older shape on top of it.)"""

    question: str


class AskError(Exception):
    """No answers came: nobody here can answer this kind of question (the
    message says what would), the wait's bound passed, or the questions are
    not well formed. ``kind`` is ``unavailable``, ``timeout`` or ``invalid``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Question:
    """One question for ``ctx.ask``: ``Question.text(...)``,
    ``Question.form(...)``, ``Question.sample(...)`` or ``Question.roots()``."""

    kind: str
    words: str = ""
    schema: Optional[dict] = None
    max_tokens: int = 0
    system: Optional[str] = None

    @staticmethod
    def text(question: str) -> "Question":
        """A question answered in words."""
        return Question("text", words=question)

    @staticmethod
    def form(message: str, schema: dict) -> "Question":
        """A form: a message and the JSON Schema of the answer object (string,
        number, integer and boolean properties, as MCP elicitation allows)."""
        return Question("form", words=message, schema=schema)

    @staticmethod
    def sample(prompt: str, max_tokens: int, system: Optional[str] = None) -> "Question":
        """A completion by the MCP client's model (sampling)."""
        return Question("sample", words=prompt, max_tokens=max_tokens, system=system)

    @staticmethod
    def roots() -> "Question":
        """The MCP client's roots: a list of ``(uri, name)``."""
        return Question("roots")

    def _wit(self, key: str):
        if self.kind == "text":
            question = _ask.Question_Text(self.words)
        elif self.kind == "form":
            question = _ask.Question_Form(_ask.Form(message=self.words, schema=json.dumps(self.schema)))
        elif self.kind == "sample":
            message = _llm.Message(role=_llm.Role.USER, content=self.words)
            question = _ask.Question_Sample(
                _ask.Sample(messages=[message], system_prompt=self.system, max_tokens=int(self.max_tokens))
            )
        else:
            question = _ask.Question_Roots()
        return _ask.InputRequest(key=key, question=question)


class Answers(dict):
    """The answers of one ask, by key: a ``str`` for text and sample, a
    ``dict`` for a form, a list of ``(uri, name)`` for roots, ``None`` when the
    person declined or dismissed it; ``status[key]`` is ``answered``,
    ``declined`` or ``cancelled``."""

    def __init__(self) -> None:
        super().__init__()
        self.status: Dict[str, str] = {}


def _answers(keys: List[str], replies: list) -> Answers:
    answers = Answers()
    for key, reply in zip(keys, replies):
        status, value = "answered", None
        if isinstance(reply, (_ask.Answer_Text, _ask.Answer_Sample)):
            value = reply.value
        elif isinstance(reply, _ask.Answer_Form):
            value = json.loads(reply.value)
        elif isinstance(reply, _ask.Answer_Roots):
            value = [(root.uri, root.name) for root in reply.value]
        elif isinstance(reply, _ask.Answer_Declined):
            status = "declined"
        else:
            status = "cancelled"
        answers[key] = value
        answers.status[key] = status
    return answers


@dataclass
class GadgetDef:
    """A gadget: its spec and its function."""

    name: str
    description: str
    function: Callable[[dict, "Context"], Any]
    schema: Optional[dict] = None
    examples: List[Tuple[dict, Optional[str], Optional[str]]] = field(default_factory=list)
    label: Optional[str] = None
    timeout_ms: Optional[int] = None
    exclusive: bool = False
    max_concurrent: Optional[int] = None


def gadget(
    description: str,
    schema: Optional[dict] = None,
    examples: Sequence[Union[dict, Tuple]] = (),
    name: Optional[str] = None,
    label: Optional[str] = None,
    timeout_ms: Optional[int] = None,
    exclusive: bool = False,
    max_concurrent: Optional[int] = None,
) -> Callable[[Callable], GadgetDef]:
    """Declares a gadget. The name defaults to the function's.

    ``examples`` are ``params``, ``(params, output)`` or
    ``(params, output, comment)``; the host checks them against the schema
    when it loads the plugin.
    """

    def wrap(function: Callable) -> GadgetDef:
        normalized = []
        for example in examples:
            if isinstance(example, dict):
                example = (example,)
            params, output, comment = (tuple(example) + (None, None))[:3]
            normalized.append((params, output, comment))
        return GadgetDef(
            name=name or function.__name__,
            description=description,
            function=function,
            schema=schema,
            examples=normalized,
            label=label,
            timeout_ms=timeout_ms,
            exclusive=exclusive,
            max_concurrent=max_concurrent,
        )

    return wrap


class Context:
    """What a gadget can ask of the host during a call."""

    def __init__(self, invocation_id: str) -> None:
        self.invocation_id = invocation_id

    def log(self, level: str, message: str, **fields: Any) -> None:
        """A log entry for people (never shown to the model); ``fields`` become structured fields."""
        levels = {
            "trace": _types.Level.TRACE,
            "debug": _types.Level.DEBUG,
            "info": _types.Level.INFO,
            "warn": _types.Level.WARN,
            "error": _types.Level.ERROR,
        }
        _host.log(
            levels.get(level, _types.Level.INFO),
            str(message),
            json.dumps(fields) if fields else "",
        )

    def debug(self, message: str, **fields: Any) -> None:
        self.log("debug", message, **fields)

    def info(self, message: str, **fields: Any) -> None:
        self.log("info", message, **fields)

    def warn(self, message: str, **fields: Any) -> None:
        self.log("warn", message, **fields)

    def error(self, message: str, **fields: Any) -> None:
        self.log("error", message, **fields)

    def report_cost(self, usd: float) -> None:
        """Reports a cost in US dollars; kept even if the call later fails."""
        _host.report_cost(float(usd))

    def progress(self, message: str) -> None:
        """A short status line for people."""
        _host.progress(str(message))

    def update(self, partial: str, details: Any = None) -> None:
        """A partial result for live display (never shown to the model)."""
        _host.update(str(partial), None if details is None else json.dumps(details))

    def cancelled(self) -> bool:
        """True once the deadline has passed or the run was cancelled."""
        return _host.cancelled()

    def check_cancelled(self) -> None:
        """Raises ``Cancelled`` once the abort signal is up: ``ctx.check_cancelled()`` in loops."""
        if self.cancelled():
            raise Cancelled()

    def time_left_ms(self) -> int:
        """Milliseconds until the call's deadline."""
        return _host.call_info().time_left_ms

    def report_progress(self, done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Progress as numbers (an MCP client sees a progress notification).
        Each report must be more than the last; the host drops one that is not."""
        _host.report_progress(float(done), None if total is None else float(total), message)

    def ask(self, **questions: Question) -> Answers:
        """Asks every question at once (each under its keyword) and waits for
        every answer: ``ctx.ask(colour=Question.form(...), side=Question.text(...))``.

        Ask before acting: over stateless HTTP the host runs the gadget again
        from the start when the answers come, and answers its earlier asks
        from the request state, so ask the same questions in the same order.
        Time waiting does not count against the deadline. Raises ``AskError``,
        or ``Cancelled`` when the call is cancelled while waiting."""
        keys = list(questions)
        requests = [question._wit(key) for key, question in questions.items()]
        try:
            replies = _ask.ask(requests)
        except Err as error:
            failure = error.value
            if isinstance(failure, _ask.AskError_Cancelled):
                raise Cancelled("cancelled while waiting for an answer") from None
            if isinstance(failure, _ask.AskError_Timeout):
                raise AskError("timeout", "no answer came in time") from None
            if isinstance(failure, _ask.AskError_Invalid):
                raise AskError("invalid", f"the questions are not well formed: {failure.value}") from None
            raise AskError("unavailable", f"no one can answer: {failure.value}") from None
        return _answers(keys, replies)

    def ask_text(self, question: str) -> Optional[str]:
        """Asks one question in words; ``None`` when the person declined."""
        return self.ask(answer=Question.text(question))["answer"]

    def answerable(self) -> set:
        """The kinds of question this call can have answered (``text``,
        ``form``, ``sample``, ``roots``), so a gadget can do without."""
        kinds = _ask.answerable()
        return {k for k, flag in (("text", _ask.Kinds.TEXT), ("form", _ask.Kinds.FORM),
                                  ("sample", _ask.Kinds.SAMPLE), ("roots", _ask.Kinds.ROOTS)) if kinds & flag}


def _contents(part: Embedded):
    if (part.text is None) == (part.blob is None):
        raise ValueError(f"resource {part.uri!r} needs text or blob (one of them)")
    body = _types.ResourceBody_Text(part.text) if part.text is not None else _types.ResourceBody_Blob(bytes(part.blob))
    return _types.ResourceContents(uri=part.uri, mime_type=part.mime_type, body=body)


def _part(part: Part):
    if isinstance(part, str):
        return _types.Content_Text(part)
    if isinstance(part, Text):
        return _types.Content_Text(part.text)
    if isinstance(part, Image):
        return _types.Content_Image(_types.Media(mime_type=part.mime_type, data=bytes(part.data)))
    if isinstance(part, Audio):
        return _types.Content_Audio(_types.Media(mime_type=part.mime_type, data=bytes(part.data)))
    if isinstance(part, Embedded):
        return _types.Content_Resource(_contents(part))
    if isinstance(part, Link):
        return _types.Content_ResourceLink(
            _types.ResourceLink(
                uri=part.uri, name=part.name, title=part.title, description=part.description, mime_type=part.mime_type
            )
        )
    raise TypeError(f"{type(part).__name__} is not a part: use str, Text, Image, Audio, Embedded or Link")


def _call_result(result: Result):
    parts = ([result.text] if result.text else []) + list(result.parts)
    return _types.CallResult(
        content=[_part(p) for p in parts],
        structured=None if result.structured is None else json.dumps(result.structured),
        cost=result.cost,
        details=None if result.details is None else json.dumps(result.details),
    )


def _outcome(name: str, value: Any, ctx: Context):
    """A gadget's return value as the contract's outcome."""
    types = _types
    if isinstance(value, AskHuman):
        answer = ctx.ask_text(str(value.question))
        if answer is None:
            raise Err(types.GadgetError_Failed("the person declined to answer"))
        value = answer
    if isinstance(value, Finish):
        return types.Outcome_Finish(_call_result(value))
    if isinstance(value, Result):
        return types.Outcome_Result(_call_result(value))
    if isinstance(value, (str, Text, Image, Audio, Embedded, Link)):
        return types.Outcome_Result(_call_result(Result(parts=[value])))
    if isinstance(value, (list, tuple)):
        return types.Outcome_Result(_call_result(Result(parts=list(value))))
    raise Err(
        types.GadgetError_Failed(
            f"gadget {name!r} returned {type(value).__name__}; return a str, a part, a list of parts, Result or Finish"
        )
    )


@dataclass
class Resource:
    """A resource with a fixed URI; ``read(uri, ctx)`` returns its contents:
    a ``str``, ``bytes``, an ``Embedded`` or a list of ``Embedded``."""

    uri: str
    name: str
    read: Callable[[str, "Context"], Any]
    description: Optional[str] = None
    mime_type: Optional[str] = None
    title: Optional[str] = None
    size: Optional[int] = None


@dataclass
class Template:
    """A family of resources: an RFC 6570 URI template of simple expressions
    (``notes://{name}``); ``read(uri, variables, ctx)`` gets the URI and its
    variables (a dict) and returns what ``Resource.read`` does, or None when
    there is no such resource."""

    uri_template: str
    name: str
    read: Callable[[str, Dict[str, str], "Context"], Any]
    description: Optional[str] = None
    mime_type: Optional[str] = None
    title: Optional[str] = None

    def match(self, uri: str) -> Optional[Dict[str, str]]:
        pattern = "".join(
            f"(?P<{piece[1:-1]}>[^/]+)" if piece.startswith("{") else re.escape(piece)
            for piece in re.split(r"(\{[A-Za-z0-9_]+\})", self.uri_template)
        )
        found = re.fullmatch(pattern, uri)
        return None if found is None else found.groupdict()


@dataclass
class Argument:
    """One argument of a prompt; ``examples`` are offered for completion."""

    name: str
    description: Optional[str] = None
    required: bool = False
    examples: Sequence[str] = ()


@dataclass
class Prompt:
    """A prompt template: ``render(arguments, ctx)`` gets the arguments (a
    dict the host has checked) and returns the messages, a list of
    ``(role, part)`` with role ``user`` or ``assistant``."""

    name: str
    render: Callable[[Dict[str, str], "Context"], Any]
    description: Optional[str] = None
    arguments: Sequence[Argument] = ()
    title: Optional[str] = None


def _read_result(uri: str, mime_type: Optional[str], value: Any) -> list:
    if isinstance(value, str):
        value = Embedded(uri=uri, text=value, mime_type=mime_type)
    elif isinstance(value, (bytes, bytearray)):
        value = Embedded(uri=uri, blob=bytes(value), mime_type=mime_type)
    items = value if isinstance(value, (list, tuple)) else [value]
    return [_contents(item) for item in items]


def _make_catalog(resources: Sequence[Resource], templates: Sequence[Template], prompts: Sequence[Prompt]):
    """The class componentize-py exports as the `catalog` interface."""
    by_uri = {r.uri: r for r in resources}
    by_prompt = {p.name: p for p in prompts}

    class Catalog:
        def resources(self):
            return [
                _catalog.Resource(
                    uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type, size=r.size
                )
                for r in resources
            ]

        def resource_templates(self):
            return [
                _catalog.ResourceTemplate(
                    uri_template=t.uri_template, name=t.name, title=t.title, description=t.description,
                    mime_type=t.mime_type,
                )
                for t in templates
            ]

        def prompts(self):
            kinds = _catalog
            return [
                kinds.Prompt(
                    name=p.name, title=p.title, description=p.description,
                    arguments=[
                        kinds.PromptArgument(
                            name=a.name, description=a.description, required=a.required, examples=list(a.examples)
                        )
                        for a in p.arguments
                    ],
                )
                for p in prompts
            ]

        def read_resource(self, uri: str):
            kinds = _catalog
            try:
                ctx = Context("")
                if uri in by_uri:
                    found = by_uri[uri]
                    return _read_result(uri, found.mime_type, found.read(uri, ctx))
                for template in templates:
                    variables = template.match(uri)
                    if variables is not None:
                        value = template.read(uri, variables, ctx)
                        if value is not None:
                            return _read_result(uri, template.mime_type, value)
            except Exception as e:
                traceback.print_exc()
                raise Err(kinds.ReadError_Failed(str(e) or type(e).__name__))
            raise Err(kinds.ReadError_NotFound())

        def get_prompt(self, name: str, arguments):
            kinds = _catalog
            prompt = by_prompt.get(name)
            if prompt is None:
                raise Err(_types.GadgetError_Failed(f"this component has no prompt {name!r}"))
            roles = {"user": kinds.Speaker.USER, "assistant": kinds.Speaker.ASSISTANT}
            try:
                messages = prompt.render(dict(arguments), Context(""))
                rendered = [kinds.PromptMessage(role=roles[role], content=_part(part)) for role, part in messages]
            except InvalidArguments as e:
                raise Err(_types.GadgetError_InvalidArguments(str(e)))
            except Exception as e:
                traceback.print_exc()
                raise Err(_types.GadgetError_Failed(str(e) or type(e).__name__))
            return kinds.PromptResult(description=prompt.description, messages=rendered)

        def complete(self, reference, argument: str, value: str, context):
            # Arguments with examples are completed by the host; nothing else is known here.
            return []

    return Catalog


def export(
    *gadgets: GadgetDef,
    resources: Sequence[Resource] = (),
    templates: Sequence[Template] = (),
    prompts: Sequence[Prompt] = (),
):
    """The class componentize-py exports: assign it to ``Gadget`` in the app
    module. It also defines the module's ``Catalog`` (the resources and
    prompts it serves; none unless given), which the contract's `catalog`
    export needs."""
    import sys

    caller = sys._getframe(1).f_globals
    caller.setdefault("Catalog", _make_catalog(resources, templates, prompts))
    by_name: Dict[str, GadgetDef] = {}
    for g in gadgets:
        if not isinstance(g, GadgetDef):
            raise TypeError(f"export() takes gadgets made with @gadget, got {g!r}")
        if g.name in by_name:
            raise ValueError(f"gadget {g.name!r} is exported twice")
        by_name[g.name] = g

    class Gadget:
        def specs(self):
            return [
                _types.GadgetSpec(
                    name=g.name,
                    label=g.label,
                    description=g.description,
                    parameters_schema="" if g.schema is None else json.dumps(g.schema),
                    examples=[
                        _types.Example(params=json.dumps(params), output=output, comment=comment)
                        for params, output, comment in g.examples
                    ],
                    timeout_ms=g.timeout_ms,
                    exclusive=g.exclusive,
                    max_concurrent=g.max_concurrent,
                )
                for g in by_name.values()
            ]

        def invoke(self, invocation_id: str, name: str, params: str):
            types = _types
            g = by_name.get(name)
            if g is None:
                raise Err(types.GadgetError_Failed(f"this component has no gadget {name!r}"))
            try:
                ctx = Context(invocation_id)
                # A bad return value (a part of the wrong type) and an
                # AskHuman nobody answers are failures too.
                return _outcome(name, g.function(json.loads(params or "{}"), ctx), ctx)
            except InvalidArguments as e:
                raise Err(types.GadgetError_InvalidArguments(str(e)))
            except Cancelled:
                raise Err(types.GadgetError_Cancelled())
            except Err:
                raise
            except Exception as e:  # any other error is a failure the model sees
                message = str(e) or type(e).__name__
                traceback.print_exc()  # to the host's captured stderr, for people
                raise Err(types.GadgetError_Failed(message))

    return Gadget
