/*
 * A Caesar cipher, written in C: the C SDK's example plugin.
 * Build: gadget build examples/c-gadget
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gadget.h"

/* The longest text Caesar takes, in bytes (the schema says so too). */
#define MAX_TEXT_BYTES 65536

static char text[MAX_TEXT_BYTES + 1];

static gadget_status caesar(gadget_call *call) {
    if (!gadget_param_string(call, "text", text, sizeof text))
        return gadget_invalid_arguments(call, "text must be a string of at most %d bytes",
                                        MAX_TEXT_BYTES);
    double shift_param = 13;
    gadget_param_number(call, "shift", &shift_param); /* the host fills in the default */
    int shift = (int)shift_param;
    if (shift < -25 || shift > 25)
        return gadget_invalid_arguments(call, "shift must be between -25 and 25, got %d", shift);
    int letters = 0;
    for (char *p = text; *p; p++) {
        char base = *p >= 'a' && *p <= 'z' ? 'a' : *p >= 'A' && *p <= 'Z' ? 'A' : 0;
        if (base) {
            *p = (char)(base + ((*p - base + shift) % 26 + 26) % 26);
            letters++;
        }
    }
    char fields[64];
    snprintf(fields, sizeof fields, "{\"letters\":%d}", letters);
    gadget_log(GADGET_INFO, "shifted", fields);
    gadget_report_cost(0.0005);
    gadget_set_details(call, fields);
    return gadget_result(call, "%s", text);
}

static gadget_status work_until_cancelled(gadget_call *call) {
    unsigned long rounds = 0;
    while (!gadget_is_cancelled()) {
        if (++rounds % 1000000 == 0) gadget_progress("still working");
    }
    gadget_warn("stopping on the abort signal");
    return gadget_cancelled(call);
}

/* GETs a URL through the host (only the origins the operator grants) and
 * returns the status and the start of the body. */
static char url[2048];

static gadget_status http_status(gadget_call *call) {
    if (!gadget_param_string(call, "url", url, sizeof url))
        return gadget_invalid_arguments(call, "url must be a string of at most %d bytes",
                                        (int)sizeof url - 1);
    /* A config value the operator grants ([plugins.c-cipher] config = ...), or NULL. */
    const char *token = gadget_config("API_TOKEN");
    char bearer[512];
    snprintf(bearer, sizeof bearer, "Bearer %s", token ? token : "");
    const char *headers[] = {"authorization", bearer, NULL};
    gadget_http_response page;
    char *error;
    if (gadget_http_get(url, token ? headers : NULL, &page, &error) != 0) {
        gadget_status failed = gadget_failed(call, "%s", error);
        free(error);
        return failed;
    }
    gadget_status done = gadget_result(call, "%d %.200s", page.status, page.body);
    gadget_http_response_free(&page);
    return done;
}

/* Asks the host's LLM (only with the operator's grant) for a headline; the
 * completion's cost is added to the call by the host. */
static char headline_text[16384];

static gadget_status headline(gadget_call *call) {
    if (!gadget_param_string(call, "text", headline_text, sizeof headline_text))
        return gadget_invalid_arguments(call, "text must be a string of at most %d bytes",
                                        (int)sizeof headline_text - 1);
    gadget_completion answer;
    char *error;
    int status = gadget_llm_complete(
        "Write one short headline for the text. Reply with the headline only.", headline_text, NULL, 40,
        &answer, &error);
    if (status == GADGET_LLM_DEADLINE) return gadget_cancelled(call);
    if (status != 0) {
        gadget_status failed = gadget_failed(call, "%s", error);
        free(error);
        return failed;
    }
    gadget_status done = gadget_result(call, "%s", answer.text);
    gadget_completion_free(&answer);
    return done;
}

static const gadget_example caesar_examples[] = {
    {.params = "{\"text\": \"Hello, World\", \"shift\": 3}", .output = "Khoor, Zruog"},
    {.params = "{\"text\": \"Uryyb\"}", .output = "Hello", .comment = "ROT13 by default"},
};

static const gadget_def gadgets[] = {
    {
        .name = "Caesar",
        .label = "Caesar cipher",
        .description = "Shifts every letter of a text by a number of places in the alphabet "
                       "(a Caesar cipher); other characters are kept. Shift by the negative "
                       "amount to decode.",
        .schema = "{\"type\":\"object\",\"properties\":{"
                  "\"text\":{\"type\":\"string\",\"maxLength\":65536,"
                  "\"description\":\"The text to encode.\"},"
                  "\"shift\":{\"type\":\"integer\",\"minimum\":-25,\"maximum\":25,\"default\":13,"
                  "\"description\":\"Places to shift each letter; negative shifts back.\"}},"
                  "\"required\":[\"text\"]}",
        .examples = caesar_examples,
        .example_count = 2,
        .invoke = caesar,
    },
    {
        .name = "WorkUntilCancelled",
        .description = "Works until told to stop: shows how a C gadget honours the abort signal.",
        .schema = "{\"type\":\"object\",\"properties\":{}}",
        .invoke = work_until_cancelled,
    },
    {
        .name = "HttpStatus",
        .label = "HTTP status",
        .description = "Fetches a URL (GET) and returns its HTTP status and the start of its "
                       "body. Only the origins the operator grants can be reached.",
        .schema = "{\"type\":\"object\",\"properties\":{\"url\":" GADGET_URL_PARAM
                  "},\"required\":[\"url\"]}",
        .invoke = http_status,
    },
    {
        .name = "Headline",
        .description = "Writes a short headline for a text, with the host's LLM.",
        .schema = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\","
                  "\"description\":\"The text to title.\"}},\"required\":[\"text\"]}",
        .invoke = headline,
    },
};

GADGET_EXPORT(gadgets)
