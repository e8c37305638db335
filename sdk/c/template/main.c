/*
 * __GADGET__: a gadget for gadget-host, in C.
 * Build: gadget build .    Check: gadget check .
 */
#include <ctype.h>

#include "gadget.h"

/* The longest text accepted, in bytes (the schema says so too). */
#define MAX_TEXT_BYTES 65536

static char text[MAX_TEXT_BYTES + 1];

static gadget_status count_words(gadget_call *call) {
    if (!gadget_param_string(call, "text", text, sizeof text))
        return gadget_invalid_arguments(call, "text must be a string of at most %d bytes", MAX_TEXT_BYTES);
    int words = 0;
    for (const char *p = text; *p; p++)
        if (!isspace((unsigned char)*p) && (p == text || isspace((unsigned char)p[-1]))) words++;
    if (words == 0) return gadget_invalid_arguments(call, "text has no words");
    gadget_info("counted");
    return gadget_result(call, "%d words", words);
}

static const gadget_example examples[] = {
    {.params = "{\"text\": \"hello world\"}", .output = "2 words"},
};

static const gadget_def gadgets[] = {{
    .name = "__GADGET__",
    .description = "Counts the words of a text. Describe here, for the model, what the gadget does.",
    .schema = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\",\"maxLength\":65536,"
              "\"description\":\"The text to count the words of.\"}},\"required\":[\"text\"]}",
    .examples = examples,
    .example_count = 1,
    .invoke = count_words,
}};

GADGET_EXPORT(gadgets)
