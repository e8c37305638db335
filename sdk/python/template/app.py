"""__GADGET__: a gadget for gadget-host, in Python.

Build: gadget build .    Check: gadget check .
Import every module you use at the top of this file: the component keeps
only the modules imported while it is built.
"""

from gadget_sdk import Context, InvalidArguments, Result, export, gadget


@gadget(
    description="Counts the words of a text. Describe here, for the model, what the gadget does.",
    schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to count the words of."},
        },
        "required": ["text"],
    },
    examples=[({"text": "hello world"}, "2 words")],
)
def __GADGET__(params: dict, ctx: Context) -> Result:
    words = params["text"].split()
    if not words:
        raise InvalidArguments("text has no words")
    ctx.info("counted", words=len(words))
    return Result(f"{len(words)} words", details={"words": len(words)})


Gadget = export(__GADGET__)
