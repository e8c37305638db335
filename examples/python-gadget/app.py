"""Word statistics, written in Python: the Python SDK's example plugin.

Build: `gadget build examples/python-gadget` (or `scripts/build-guests.sh`).
"""

from collections import Counter

from gadget_sdk import Context, InvalidArguments, Cancelled, Result, complete, config, export, gadget, http, url_param


@gadget(
    description="Counts the words of a text and lists the most frequent ones, most frequent first.",
    schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to analyse."},
            "top": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "default": 3,
                "description": "How many of the most frequent words to list.",
            },
        },
        "required": ["text"],
    },
    examples=[
        ({"text": "the cat and the hat", "top": 2}, "5 words\nthe: 2\ncat: 1", "Ties keep the order of first use"),
    ],
    label="Word frequency",
)
def WordFrequency(params: dict, ctx: Context) -> Result:
    words = params["text"].lower().split()
    if not words:
        raise InvalidArguments("text has no words: give it some text")
    ctx.info("counting words", words=len(words))
    counts = Counter(words).most_common(params["top"])
    # A pretend metered API: a tenth of a cent per call.
    ctx.report_cost(0.001)
    lines = [f"{len(words)} words"] + [f"{word}: {n}" for word, n in counts]
    return Result("\n".join(lines), details={"words": len(words)})


@gadget(
    description="Works until told to stop, reporting progress: shows how a Python gadget honours the abort signal.",
    schema={"type": "object", "properties": {}},
)
def WorkUntilCancelled(params: dict, ctx: Context) -> str:
    rounds = 0
    while True:
        rounds += 1
        if rounds % 100_000 == 0:
            ctx.progress(f"{rounds} rounds")
        if ctx.cancelled():
            ctx.warn("stopping on the abort signal", rounds=rounds)
            raise Cancelled()


@gadget(
    description="Fetches a URL (GET, or POST with a body) and returns its HTTP status and the start of its body. Only the origins the operator grants can be reached.",
    schema={
        "type": "object",
        "properties": {
            "url": url_param("An http or https URL."),
            "body": {"type": "string", "description": "Send this body with POST instead of a GET."},
        },
        "required": ["url"],
    },
    label="HTTP status",
)
def HttpStatus(params: dict, ctx: Context) -> Result:
    # A config value the operator grants (`[plugins.python-words] config =
    # { API_TOKEN = { env = "VAR" } }`); None when not granted.
    token = config("API_TOKEN")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    # HttpDenied when the origin is not granted, with a body or without.
    if "body" in params:
        page = http.request("POST", params["url"], headers, params["body"].encode())
    else:
        page = http.get(params["url"], headers)
    return Result(
        f"{page.status} {page.text()[:200]}",
        details={"bytes": len(page.body), "content_type": page.header("content-type")},
    )


@gadget(
    description="Writes a short headline for a text, with the host's LLM.",
    schema={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to title."}},
        "required": ["text"],
    },
)
def Headline(params: dict, ctx: Context) -> Result:
    # Only with the operator's grant; the completion's cost is added to the call.
    answer = complete(
        params["text"],
        system="Write one short headline for the text. Reply with the headline only.",
        max_tokens=40,
    )
    return Result(answer.text, details={"model": answer.model, "cost_usd": answer.cost})


Gadget = export(WordFrequency, WorkUntilCancelled, HttpStatus, Headline)
