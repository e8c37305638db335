/*
 * gadget.h: the C SDK for gadget-host gadgets.
 *
 * Contract gadget:plugin@0.3.0. A gadget is a function that gets the call
 * (its validated parameters as JSON text, with helpers to read them) and
 * ends it with one of the gadget_result / gadget_finish / gadget_ask_human /
 * gadget_invalid_arguments / gadget_failed / gadget_cancelled functions. A
 * result may carry parts beside its text (images, sounds, resources, links,
 * structured JSON); a running gadget may ask questions and carry on with the
 * answers (gadget_ask); a component may serve resources and prompts
 * (GADGET_EXPORT_CATALOG). The component lists its
 * gadgets in an array of gadget_def and exports it with GADGET_EXPORT:
 *
 *     #include "gadget.h"
 *
 *     static gadget_status word_count(gadget_call *call) {
 *         char text[4096];
 *         if (!gadget_param_string(call, "text", text, sizeof text))
 *             return gadget_invalid_arguments(call, "text must be a string under 4 KiB");
 *         gadget_info("counting");
 *         return gadget_result(call, "%d words", count_words(text));
 *     }
 *
 *     static const gadget_example examples[] = {
 *         { .params = "{\"text\": \"hello world\"}", .output = "2 words" },
 *     };
 *
 *     static const gadget_def gadgets[] = {{
 *         .name = "WordCount",
 *         .description = "Counts the words of a text.",
 *         .schema = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}",
 *         .examples = examples, .example_count = 1,
 *         .invoke = word_count,
 *     }};
 *     GADGET_EXPORT(gadgets)
 *
 * Build: `gadget build DIR` (clang-19 for wasm32-wasi, linked into a
 * component by wasm-component-ld). The host validates the parameters
 * against the schema before calling, so a gadget can trust their shape.
 */
#ifndef GADGET_SDK_H
#define GADGET_SDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a gadget function returns: use the return value of the gadget_*
 * functions that end a call. */
typedef enum {
    GADGET_OK = 0,
    GADGET_ERROR = 1,
} gadget_status;

/* One call in progress. Read the fields; end it with one of the functions
 * below. */
typedef struct gadget_call {
    /* The call's invocation id, NUL-terminated. */
    const char *invocation_id;
    /* The gadget's name, as in its gadget_def. */
    const char *name;
    /* The validated parameters, a JSON object, NUL-terminated. */
    const char *params;
    /* Private: how the call ended. */
    int kind;
    char *text;
    bool has_cost;
    double cost;
    char *details;
    struct gadget_part *parts;
    size_t part_count, part_cap;
    char *structured;
} gadget_call;

/* One example call, shown to the model and checked by the host at load. */
typedef struct {
    const char *params;  /* a JSON object */
    const char *output;  /* what the gadget returns, or NULL */
    const char *comment; /* what the example shows, or NULL */
} gadget_example;

/* The schemas of a parameter that is a URL or a file path, to put in a
 * gadget's schema string: the format tells the host what the value means,
 * so the operator's rules match it by meaning (HTTP://x is http://x;
 * /out/./a is /out/a). In a schema:
 * "{\"type\":\"object\",\"properties\":{\"url\":" GADGET_URL_PARAM "}}" */
#define GADGET_URL_PARAM "{\"type\":\"string\",\"format\":\"uri\"}"
#define GADGET_PATH_PARAM "{\"type\":\"string\",\"format\":\"path\"}"

/* One gadget of the component. */
typedef struct {
    const char *name;        /* letters, digits and '_' */
    const char *description; /* what the model reads */
    const char *schema;      /* JSON Schema of the parameters, or NULL for none */
    const gadget_example *examples;
    size_t example_count;
    const char *label;       /* for people, or NULL */
    uint32_t timeout_ms;     /* 0: the host's default */
    bool exclusive;          /* runs alone */
    uint32_t max_concurrent; /* 0: no limit */
    gadget_status (*invoke)(gadget_call *call);
} gadget_def;

/* Exports the component's gadgets: use once, at file scope. */
#define GADGET_EXPORT(array)                                   \
    const gadget_def *const gadget_defs = (array);             \
    const size_t gadget_def_count = sizeof(array) / sizeof((array)[0]);

/* ---- Ending a call (printf-style texts) ---- */

/* A result for the model. */
gadget_status gadget_result(gadget_call *call, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The task is complete: the agent loop ends after this response. */
gadget_status gadget_finish(gadget_call *call, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* A question for a person; the answer becomes the call's result (asked
 * with gadget_ask; to carry on with the answer, call gadget_ask_text). */
gadget_status gadget_ask_human(gadget_call *call, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The parameters are unusable; say what to change. */
gadget_status gadget_invalid_arguments(gadget_call *call, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The gadget tried and failed. */
gadget_status gadget_failed(gadget_call *call, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The gadget stopped on the abort signal (gadget_is_cancelled). */
gadget_status gadget_cancelled(gadget_call *call);

/* Adds a returned cost (USD) to a result. */
void gadget_set_cost(gadget_call *call, double usd);
/* Adds details for people (a JSON text) to a result. */
void gadget_set_details(gadget_call *call, const char *json);

/* ---- Results in parts (contract 0.3.0) ----
 *
 * A result is its text (gadget_result's, when not empty), then the parts
 * added before it, in order. The host's result limit covers them all; a
 * model that cannot take a part is shown its type and size. mime_type and
 * other optional texts may be NULL where marked. */
void gadget_add_text(gadget_call *call, const char *text);
void gadget_add_image(gadget_call *call, const char *mime_type, const uint8_t *data, size_t len);
void gadget_add_audio(gadget_call *call, const char *mime_type, const uint8_t *data, size_t len);
/* A resource's contents, embedded (mime_type may be NULL). */
void gadget_add_resource_text(gadget_call *call, const char *uri, const char *mime_type,
                              const char *text);
void gadget_add_resource_blob(gadget_call *call, const char *uri, const char *mime_type,
                              const uint8_t *data, size_t len);
/* A link to a resource the client may read (mime_type may be NULL). */
void gadget_add_link(gadget_call *call, const char *uri, const char *name, const char *mime_type);
/* The result as JSON too (MCP's structuredContent); must be valid JSON. */
void gadget_set_structured(gadget_call *call, const char *json);

/* ---- Reading parameters (top-level members of the params object) ---- */

/* Copies the string member `key` (JSON escapes decoded, UTF-8) into buf,
 * NUL-terminated. False if absent, not a string, or longer than cap - 1. */
bool gadget_param_string(const gadget_call *call, const char *key, char *buf, size_t cap);
/* The number member `key`. False if absent or not a number. */
bool gadget_param_number(const gadget_call *call, const char *key, double *out);
/* The boolean member `key`. False if absent or not a boolean. */
bool gadget_param_bool(const gadget_call *call, const char *key, bool *out);

/* ---- Host services ---- */

typedef enum {
    GADGET_TRACE = 0,
    GADGET_DEBUG = 1,
    GADGET_INFO = 2,
    GADGET_WARN = 3,
    GADGET_ERROR_LEVEL = 4,
} gadget_level;

/* A log entry for people (never shown to the model); fields_json is a JSON
 * object or NULL. */
void gadget_log(gadget_level level, const char *message, const char *fields_json);
void gadget_info(const char *message);
void gadget_warn(const char *message);
/* Reports a cost in USD; kept even if the call later fails. */
void gadget_report_cost(double usd);
/* A short status line for people. */
void gadget_progress(const char *message);
/* Progress as numbers: done so far, of total (a negative total: unknown),
 * with an optional message (NULL). Each report must be more than the last. */
void gadget_report_progress(double done, double total, const char *message);
/* True once the deadline has passed or the run was cancelled: check it in
 * long loops and end with gadget_cancelled. */
bool gadget_is_cancelled(void);
/* Milliseconds until the call's deadline. */
uint64_t gadget_time_left_ms(void);

/* ---- Configuration and HTTP, as far as the operator grants them ----
 *
 * A configuration value the operator granted this plugin (the manifest asks
 * under [permissions] config), or NULL. Granted values are the instance's
 * environment, so this is getenv; nothing else of the host's environment is
 * there. Secret values are redacted from everything the gadget sends back. */
const char *gadget_config(const char *key);

/* A response, read whole (the host caps its size). */
typedef struct {
    int status;
    char *body;          /* body_len bytes, then a NUL */
    size_t body_len;
    char *content_type;  /* or NULL */
    char *location;      /* or NULL (redirects are not followed) */
} gadget_http_response;

/* The host refused the request: the origin is not granted to this plugin
 * (the call's log names the grant that would allow it). */
#define GADGET_HTTP_DENIED (-2)

/* GET url over the standard wasi:http interface; the host sends it, only to
 * the origins the operator grants (the manifest asks under [permissions]
 * http). headers: NULL, or "name", "value", ..., NULL. Returns 0 and fills
 * *out (free it with gadget_http_response_free), or GADGET_HTTP_DENIED or -1
 * with *error set to a message (free it). */
int gadget_http_get(const char *url, const char *const *headers, gadget_http_response *out,
                    char **error);
void gadget_http_response_free(gadget_http_response *response);

/* ---- The host's LLM (the contract's llm import) ----
 *
 * The manifest asks with [permissions] llm = true; the operator grants models
 * and a per-call budget. The host adds each completion's cost to the call's
 * cost, checks the budget before sending, and ends a completion at the call's
 * deadline. */

/* A completion's answer; free it with gadget_completion_free. */
typedef struct {
    char *text;   /* NUL-terminated */
    char *model;  /* "provider:model" that answered */
    uint64_t input_tokens;
    uint64_t output_tokens;
    double cost;  /* USD, already added to the call's cost */
} gadget_completion;

/* The call's deadline passed (or it was cancelled) during the completion:
 * end the call with gadget_cancelled (the host reports a timeout or a
 * cancellation). */
#define GADGET_LLM_DEADLINE (-3)

/* One completion: an optional system text (NULL for none) and the user's text.
 * model: NULL for the first granted model; max_tokens: 0 for the host's
 * default. Returns 0 and fills *out, or GADGET_LLM_DEADLINE, or -1 with *error
 * set to the reason (denied, budget exceeded, provider failed; free it). */
int gadget_llm_complete(const char *system, const char *user, const char *model,
                        uint32_t max_tokens, gadget_completion *out, char **error);
void gadget_completion_free(gadget_completion *completion);

/* ---- Asking and carrying on (contract 0.3.0) ----
 *
 * Questions for the person at the terminal (gadget run, gadget agent) or the
 * MCP client (gadget mcp, gadget serve), answered while the gadget runs. Ask
 * before acting, and the same questions in the same order for the same
 * parameters: over stateless HTTP the host runs the gadget again and answers
 * its earlier asks from the recorded answers. Waiting does not count
 * against the deadline. */

typedef enum {
    GADGET_QUESTION_TEXT = 0,   /* text: the question */
    GADGET_QUESTION_FORM = 1,   /* text: the message; schema: the answer's JSON Schema */
    GADGET_QUESTION_SAMPLE = 2, /* text: the user's message to the client's model */
    GADGET_QUESTION_ROOTS = 3,  /* the client's roots */
} gadget_question_kind;

typedef struct {
    const char *key; /* letters, digits, '_' and '-'; unique within one ask */
    gadget_question_kind kind;
    const char *text;
    const char *schema;  /* FORM: a JSON Schema of an object */
    const char *system;  /* SAMPLE: a system prompt, or NULL */
    uint32_t max_tokens; /* SAMPLE: 0 for 1000 */
} gadget_question;

typedef enum {
    GADGET_ANSWER_TEXT = 0,      /* value: the words */
    GADGET_ANSWER_FORM = 1,      /* value: the JSON object */
    GADGET_ANSWER_SAMPLE = 2,    /* value: the model's text */
    GADGET_ANSWER_ROOTS = 3,     /* value: [{"uri": "...", "name": "..."}, ...] */
    GADGET_ANSWER_DECLINED = 4,  /* value: NULL */
    GADGET_ANSWER_CANCELLED = 5, /* value: NULL */
} gadget_answer_kind;

typedef struct {
    gadget_answer_kind kind;
    char *value;
} gadget_answer;

/* Which kinds can be answered in this call (a gadget can do without). */
#define GADGET_CAN_TEXT 1u
#define GADGET_CAN_FORM 2u
#define GADGET_CAN_SAMPLE 4u
#define GADGET_CAN_ROOTS 8u
unsigned gadget_answerable(void);

/* Nobody here can answer (the message says what would). */
#define GADGET_ASK_UNAVAILABLE (-4)
/* The questions are malformed (the message says which). */
#define GADGET_ASK_INVALID (-5)
/* No answer within the host's bound for waiting. */
#define GADGET_ASK_TIMEOUT (-6)
/* The call was cancelled while waiting: end with gadget_cancelled. */
#define GADGET_ASK_CANCELLED (-3)

/* Asks every question at once. Returns 0 and fills answers[0..count) (free
 * with gadget_answers_free), or one of the codes above with *error set to a
 * message (free it; NULL for TIMEOUT and CANCELLED). */
int gadget_ask(const gadget_question *questions, size_t count, gadget_answer *answers,
               char **error);
void gadget_answers_free(gadget_answer *answers, size_t count);
/* One text question: 0 with *answer set (free it), 1 if declined or
 * dismissed, or a code above with *error set. */
int gadget_ask_text(const char *question, char **answer, char **error);

/* ---- Resources and prompts (contract 0.3.0) ----
 *
 * A component may serve resources (fixed URIs and URI templates such as
 * "notes://{name}") and prompts, read once at load; each read, prompt and
 * completion runs in a fresh instance under the plugin's grants, as a call
 * does. Export them once with GADGET_EXPORT_CATALOG(catalog); without it the
 * component serves none. Optional texts may be NULL. */

typedef struct {
    const char *uri, *name, *title, *description, *mime_type;
    long long size; /* bytes; -1: unknown */
} gadget_resource;

typedef struct {
    const char *uri_template, *name, *title, *description, *mime_type;
} gadget_resource_template;

typedef struct {
    const char *name, *description;
    bool required;
    const char *const *examples; /* offered when a client completes it */
    size_t example_count;
} gadget_prompt_argument;

typedef struct {
    const char *name, *title, *description;
    const gadget_prompt_argument *arguments;
    size_t argument_count;
} gadget_prompt;

/* What a read gives back: add contents, or say why not. */
typedef struct gadget_read gadget_read;
void gadget_read_text(gadget_read *read, const char *uri, const char *mime_type, const char *text);
void gadget_read_blob(gadget_read *read, const char *uri, const char *mime_type,
                      const uint8_t *data, size_t len);
gadget_status gadget_read_not_found(gadget_read *read);
gadget_status gadget_read_failed(gadget_read *read, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* What a prompt renders to: messages, each one part. */
typedef struct gadget_prompt_reply gadget_prompt_reply;
typedef enum { GADGET_USER = 0, GADGET_ASSISTANT = 1 } gadget_speaker;
void gadget_prompt_description(gadget_prompt_reply *reply, const char *description);
void gadget_prompt_text(gadget_prompt_reply *reply, gadget_speaker role, const char *text);
void gadget_prompt_image(gadget_prompt_reply *reply, gadget_speaker role, const char *mime_type,
                         const uint8_t *data, size_t len);
gadget_status gadget_prompt_failed(gadget_prompt_reply *reply, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

typedef struct {
    const gadget_resource *resources;
    size_t resource_count;
    const gadget_resource_template *templates;
    size_t template_count;
    const gadget_prompt *prompts;
    size_t prompt_count;
    /* Reads uri (one of resources, or one a template matches). */
    gadget_status (*read)(const char *uri, gadget_read *out);
    /* Renders prompt name; arguments_json is an object of string values,
     * checked by the host (every required one there, none unknown). */
    gadget_status (*prompt)(const char *name, const char *arguments_json, gadget_prompt_reply *out);
    /* Values for argument of a prompt (is_prompt) or a template (reference is
     * its URI template) that match value, best first: fills values[0..cap)
     * with strings that outlive the call (static ones), returns how many.
     * NULL: the examples are all a client is offered. */
    size_t (*complete)(bool is_prompt, const char *reference, const char *argument,
                       const char *value, const char **values, size_t cap);
} gadget_catalog;

/* Exports the component's resources and prompts: use once, at file scope. */
#define GADGET_EXPORT_CATALOG(catalog) \
    const gadget_catalog *const gadget_catalog_def = &(catalog);

#ifdef __cplusplus
}
#endif

#endif /* GADGET_SDK_H */
