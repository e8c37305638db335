/*
 * content.c: what contract gadget:plugin@0.3.0 adds for C gadgets: a
 * result's parts, numeric progress, asking and carrying on, and the catalog
 * export (resources, templates, prompts, completion).
 *
 * Ownership as in gadget.c: what the host passes in is freed here, what we
 * return are copies the generated post-return functions free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- Small helpers ---- */

static void *must(void *p) {
    if (p == NULL) abort();
    return p;
}

static char *copy_or_null(const char *s) { return s == NULL ? NULL : must(strdup(s)); }

static void bytes_dup(plugin_http_v3_list_u8_t *out, const uint8_t *data, size_t len) {
    out->len = len;
    out->ptr = must(malloc(len ? len : 1));
    if (len) memcpy(out->ptr, data, len);
}

/* A growing text, for the JSON this file writes. */
typedef struct {
    char *text;
    size_t len, cap;
} buffer;

static void put(buffer *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->text = must(realloc(b->text, b->cap));
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

static void put_json_string(buffer *b, const char *s, size_t n) {
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char escaped[8];
        if (c == '"' || c == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)c;
            put(b, escaped, 2);
        } else if (c < 0x20) {
            snprintf(escaped, sizeof escaped, "\\u%04x", c);
            put(b, escaped, 6);
        } else {
            put(b, (const char *)&s[i], 1);
        }
    }
    put(b, "\"", 1);
}

/* ---- A result's parts ---- */

typedef enum {
    PART_TEXT,
    PART_IMAGE,
    PART_AUDIO,
    PART_RESOURCE_TEXT,
    PART_RESOURCE_BLOB,
    PART_LINK,
} part_kind;

struct gadget_part {
    part_kind kind;
    char *first;  /* the text, or the resource's URI */
    char *second; /* the resource's text, or the link's name */
    char *mime_type;
    uint8_t *data;
    size_t len;
};

static struct gadget_part *new_part(gadget_call *call, part_kind kind) {
    if (call->part_count == call->part_cap) {
        call->part_cap = call->part_cap ? call->part_cap * 2 : 4;
        call->parts = must(realloc(call->parts, call->part_cap * sizeof *call->parts));
    }
    struct gadget_part *part = &call->parts[call->part_count++];
    memset(part, 0, sizeof *part);
    part->kind = kind;
    return part;
}

static void keep_bytes(struct gadget_part *part, const uint8_t *data, size_t len) {
    part->data = must(malloc(len ? len : 1));
    if (len) memcpy(part->data, data, len);
    part->len = len;
}

void gadget_add_text(gadget_call *call, const char *text) {
    new_part(call, PART_TEXT)->first = must(strdup(text));
}

void gadget_add_image(gadget_call *call, const char *mime_type, const uint8_t *data, size_t len) {
    struct gadget_part *part = new_part(call, PART_IMAGE);
    part->mime_type = must(strdup(mime_type));
    keep_bytes(part, data, len);
}

void gadget_add_audio(gadget_call *call, const char *mime_type, const uint8_t *data, size_t len) {
    struct gadget_part *part = new_part(call, PART_AUDIO);
    part->mime_type = must(strdup(mime_type));
    keep_bytes(part, data, len);
}

void gadget_add_resource_text(gadget_call *call, const char *uri, const char *mime_type,
                              const char *text) {
    struct gadget_part *part = new_part(call, PART_RESOURCE_TEXT);
    part->first = must(strdup(uri));
    part->mime_type = copy_or_null(mime_type);
    part->second = must(strdup(text));
}

void gadget_add_resource_blob(gadget_call *call, const char *uri, const char *mime_type,
                              const uint8_t *data, size_t len) {
    struct gadget_part *part = new_part(call, PART_RESOURCE_BLOB);
    part->first = must(strdup(uri));
    part->mime_type = copy_or_null(mime_type);
    keep_bytes(part, data, len);
}

void gadget_add_link(gadget_call *call, const char *uri, const char *name, const char *mime_type) {
    struct gadget_part *part = new_part(call, PART_LINK);
    part->first = must(strdup(uri));
    part->second = must(strdup(name));
    part->mime_type = copy_or_null(mime_type);
}

void gadget_set_structured(gadget_call *call, const char *json) {
    free(call->structured);
    call->structured = must(strdup(json));
}

/* One part as the contract's content. */
static void to_content(const struct gadget_part *part, gadget_plugin_0_3_0_types_content_t *out) {
    memset(out, 0, sizeof *out);
    switch (part->kind) {
    case PART_TEXT:
        out->tag = GADGET_PLUGIN_0_3_0_TYPES_CONTENT_TEXT;
        plugin_http_v3_string_dup(&out->val.text, part->first);
        break;
    case PART_IMAGE:
    case PART_AUDIO: {
        out->tag = part->kind == PART_IMAGE ? GADGET_PLUGIN_0_3_0_TYPES_CONTENT_IMAGE
                                            : GADGET_PLUGIN_0_3_0_TYPES_CONTENT_AUDIO;
        gadget_plugin_0_3_0_types_media_t *media =
            part->kind == PART_IMAGE ? &out->val.image : &out->val.audio;
        plugin_http_v3_string_dup(&media->mime_type, part->mime_type);
        bytes_dup(&media->data, part->data, part->len);
        break;
    }
    case PART_RESOURCE_TEXT:
    case PART_RESOURCE_BLOB: {
        out->tag = GADGET_PLUGIN_0_3_0_TYPES_CONTENT_RESOURCE;
        gadget_plugin_0_3_0_types_resource_contents_t *r = &out->val.resource;
        plugin_http_v3_string_dup(&r->uri, part->first);
        gadget__set_option(&r->mime_type, part->mime_type);
        if (part->kind == PART_RESOURCE_TEXT) {
            r->body.tag = GADGET_PLUGIN_0_3_0_TYPES_RESOURCE_BODY_TEXT;
            plugin_http_v3_string_dup(&r->body.val.text, part->second);
        } else {
            r->body.tag = GADGET_PLUGIN_0_3_0_TYPES_RESOURCE_BODY_BLOB;
            bytes_dup(&r->body.val.blob, part->data, part->len);
        }
        break;
    }
    case PART_LINK: {
        out->tag = GADGET_PLUGIN_0_3_0_TYPES_CONTENT_RESOURCE_LINK;
        gadget_plugin_0_3_0_types_resource_link_t *link = &out->val.resource_link;
        plugin_http_v3_string_dup(&link->uri, part->first);
        plugin_http_v3_string_dup(&link->name, part->second);
        gadget__set_option(&link->mime_type, part->mime_type);
        break;
    }
    }
}

void gadget__result_parts(const gadget_call *call, const char *text,
                          gadget_plugin_0_3_0_types_call_result_t *result) {
    bool has_text = text != NULL && text[0] != '\0';
    size_t count = call->part_count + (has_text ? 1 : 0);
    result->content.len = count;
    result->content.ptr = must(calloc(count ? count : 1, sizeof *result->content.ptr));
    size_t at = 0;
    if (has_text) {
        result->content.ptr[at].tag = GADGET_PLUGIN_0_3_0_TYPES_CONTENT_TEXT;
        plugin_http_v3_string_dup(&result->content.ptr[at++].val.text, text);
    }
    for (size_t i = 0; i < call->part_count; i++) to_content(&call->parts[i], &result->content.ptr[at++]);
    gadget__set_option(&result->structured, call->structured);
}

void gadget__parts_free(gadget_call *call) {
    for (size_t i = 0; i < call->part_count; i++) {
        free(call->parts[i].first);
        free(call->parts[i].second);
        free(call->parts[i].mime_type);
        free(call->parts[i].data);
    }
    free(call->parts);
    free(call->structured);
    call->parts = NULL;
    call->part_count = call->part_cap = 0;
    call->structured = NULL;
}

/* ---- Progress ---- */

void gadget_report_progress(double done, double total, const char *message) {
    plugin_http_v3_string_t text;
    if (message != NULL) plugin_http_v3_string_set(&text, message);
    gadget_plugin_0_3_0_host_report_progress(done, total < 0 ? NULL : &total,
                                             message == NULL ? NULL : &text);
}

/* ---- Asking ---- */

unsigned gadget_answerable(void) {
    gadget_plugin_0_3_0_ask_kinds_t kinds = gadget_plugin_0_3_0_ask_answerable();
    unsigned out = 0;
    if (kinds & GADGET_PLUGIN_0_3_0_ASK_KINDS_TEXT) out |= GADGET_CAN_TEXT;
    if (kinds & GADGET_PLUGIN_0_3_0_ASK_KINDS_FORM) out |= GADGET_CAN_FORM;
    if (kinds & GADGET_PLUGIN_0_3_0_ASK_KINDS_SAMPLE) out |= GADGET_CAN_SAMPLE;
    if (kinds & GADGET_PLUGIN_0_3_0_ASK_KINDS_ROOTS) out |= GADGET_CAN_ROOTS;
    return out;
}

static void to_question(const gadget_question *q, gadget_plugin_0_3_0_ask_input_request_t *out) {
    memset(out, 0, sizeof *out);
    plugin_http_v3_string_dup(&out->key, q->key);
    const char *text = q->text == NULL ? "" : q->text;
    switch (q->kind) {
    case GADGET_QUESTION_FORM:
        out->question.tag = GADGET_PLUGIN_0_3_0_ASK_QUESTION_FORM;
        plugin_http_v3_string_dup(&out->question.val.form.message, text);
        plugin_http_v3_string_dup(&out->question.val.form.schema,
                                  q->schema == NULL ? "{\"type\":\"object\"}" : q->schema);
        break;
    case GADGET_QUESTION_SAMPLE: {
        out->question.tag = GADGET_PLUGIN_0_3_0_ASK_QUESTION_SAMPLE;
        gadget_plugin_0_3_0_ask_sample_t *sample = &out->question.val.sample;
        sample->messages.len = 1;
        sample->messages.ptr = must(calloc(1, sizeof *sample->messages.ptr));
        sample->messages.ptr[0].role = GADGET_PLUGIN_0_3_0_LLM_ROLE_USER;
        plugin_http_v3_string_dup(&sample->messages.ptr[0].content, text);
        gadget__set_option(&sample->system_prompt, q->system);
        sample->max_tokens = q->max_tokens ? q->max_tokens : 1000;
        break;
    }
    case GADGET_QUESTION_ROOTS:
        out->question.tag = GADGET_PLUGIN_0_3_0_ASK_QUESTION_ROOTS;
        break;
    default:
        out->question.tag = GADGET_PLUGIN_0_3_0_ASK_QUESTION_TEXT;
        plugin_http_v3_string_dup(&out->question.val.text, text);
        break;
    }
}

/* The roots answer as a JSON array of {"uri", "name"}. */
static char *roots_json(const gadget_plugin_0_3_0_ask_list_root_t *roots) {
    buffer b = {0};
    put(&b, "[", 1);
    for (size_t i = 0; i < roots->len; i++) {
        if (i) put(&b, ",", 1);
        put(&b, "{\"uri\":", 7);
        put_json_string(&b, (const char *)roots->ptr[i].uri.ptr, roots->ptr[i].uri.len);
        if (roots->ptr[i].name.is_some) {
            put(&b, ",\"name\":", 8);
            put_json_string(&b, (const char *)roots->ptr[i].name.val.ptr,
                            roots->ptr[i].name.val.len);
        }
        put(&b, "}", 1);
    }
    put(&b, "]", 1);
    return b.text;
}

static void from_answer(const gadget_plugin_0_3_0_ask_answer_t *in, gadget_answer *out) {
    out->value = NULL;
    switch (in->tag) {
    case GADGET_PLUGIN_0_3_0_ASK_ANSWER_TEXT:
        out->kind = GADGET_ANSWER_TEXT;
        out->value = gadget__to_cstring(&in->val.text);
        break;
    case GADGET_PLUGIN_0_3_0_ASK_ANSWER_FORM:
        out->kind = GADGET_ANSWER_FORM;
        out->value = gadget__to_cstring(&in->val.form);
        break;
    case GADGET_PLUGIN_0_3_0_ASK_ANSWER_SAMPLE:
        out->kind = GADGET_ANSWER_SAMPLE;
        out->value = gadget__to_cstring(&in->val.sample);
        break;
    case GADGET_PLUGIN_0_3_0_ASK_ANSWER_ROOTS:
        out->kind = GADGET_ANSWER_ROOTS;
        out->value = roots_json(&in->val.roots);
        break;
    case GADGET_PLUGIN_0_3_0_ASK_ANSWER_DECLINED:
        out->kind = GADGET_ANSWER_DECLINED;
        break;
    default:
        out->kind = GADGET_ANSWER_CANCELLED;
        break;
    }
}

int gadget_ask(const gadget_question *questions, size_t count, gadget_answer *answers,
               char **error) {
    *error = NULL;
    gadget_plugin_0_3_0_ask_list_input_request_t requests;
    requests.len = count;
    requests.ptr = must(calloc(count ? count : 1, sizeof *requests.ptr));
    for (size_t i = 0; i < count; i++) to_question(&questions[i], &requests.ptr[i]);
    gadget_plugin_0_3_0_ask_list_answer_t got;
    gadget_plugin_0_3_0_ask_ask_error_t failure;
    bool ok = gadget_plugin_0_3_0_ask_ask(&requests, &got, &failure);
    gadget_plugin_0_3_0_ask_list_input_request_free(&requests);
    if (!ok) {
        int code = -1;
        switch (failure.tag) {
        case GADGET_PLUGIN_0_3_0_ASK_ASK_ERROR_UNAVAILABLE:
            *error = gadget__to_cstring(&failure.val.unavailable);
            code = GADGET_ASK_UNAVAILABLE;
            break;
        case GADGET_PLUGIN_0_3_0_ASK_ASK_ERROR_INVALID:
            *error = gadget__to_cstring(&failure.val.invalid);
            code = GADGET_ASK_INVALID;
            break;
        case GADGET_PLUGIN_0_3_0_ASK_ASK_ERROR_TIMEOUT:
            code = GADGET_ASK_TIMEOUT;
            break;
        default:
            code = GADGET_ASK_CANCELLED;
            break;
        }
        gadget_plugin_0_3_0_ask_ask_error_free(&failure);
        return code;
    }
    for (size_t i = 0; i < count; i++) {
        if (i < got.len) {
            from_answer(&got.ptr[i], &answers[i]);
        } else {
            answers[i].kind = GADGET_ANSWER_CANCELLED;
            answers[i].value = NULL;
        }
    }
    gadget_plugin_0_3_0_ask_list_answer_free(&got);
    return 0;
}

void gadget_answers_free(gadget_answer *answers, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(answers[i].value);
        answers[i].value = NULL;
    }
}

int gadget_ask_text(const char *question, char **answer, char **error) {
    gadget_question q = {.key = "answer", .kind = GADGET_QUESTION_TEXT, .text = question};
    gadget_answer got;
    int asked = gadget_ask(&q, 1, &got, error);
    if (asked != 0) return asked;
    if (got.kind != GADGET_ANSWER_TEXT) {
        gadget_answers_free(&got, 1);
        return 1;
    }
    *answer = got.value;
    return 0;
}

/* ---- The catalog ---- */

/* Provided by GADGET_EXPORT_CATALOG in the gadget's source; a component
 * without one serves none. */
__attribute__((weak)) const gadget_catalog *const gadget_catalog_def = NULL;

void exports_gadget_plugin_0_3_0_catalog_resources(
    exports_gadget_plugin_0_3_0_catalog_list_resource_t *ret) {
    const gadget_catalog *c = gadget_catalog_def;
    size_t n = c == NULL ? 0 : c->resource_count;
    ret->len = n;
    ret->ptr = must(calloc(n ? n : 1, sizeof *ret->ptr));
    for (size_t i = 0; i < n; i++) {
        const gadget_resource *r = &c->resources[i];
        plugin_http_v3_string_dup(&ret->ptr[i].uri, r->uri);
        plugin_http_v3_string_dup(&ret->ptr[i].name, r->name);
        gadget__set_option(&ret->ptr[i].title, r->title);
        gadget__set_option(&ret->ptr[i].description, r->description);
        gadget__set_option(&ret->ptr[i].mime_type, r->mime_type);
        ret->ptr[i].size.is_some = r->size >= 0;
        ret->ptr[i].size.val = r->size >= 0 ? (uint64_t)r->size : 0;
    }
}

void exports_gadget_plugin_0_3_0_catalog_resource_templates(
    exports_gadget_plugin_0_3_0_catalog_list_resource_template_t *ret) {
    const gadget_catalog *c = gadget_catalog_def;
    size_t n = c == NULL ? 0 : c->template_count;
    ret->len = n;
    ret->ptr = must(calloc(n ? n : 1, sizeof *ret->ptr));
    for (size_t i = 0; i < n; i++) {
        const gadget_resource_template *t = &c->templates[i];
        plugin_http_v3_string_dup(&ret->ptr[i].uri_template, t->uri_template);
        plugin_http_v3_string_dup(&ret->ptr[i].name, t->name);
        gadget__set_option(&ret->ptr[i].title, t->title);
        gadget__set_option(&ret->ptr[i].description, t->description);
        gadget__set_option(&ret->ptr[i].mime_type, t->mime_type);
    }
}

void exports_gadget_plugin_0_3_0_catalog_prompts(
    exports_gadget_plugin_0_3_0_catalog_list_prompt_t *ret) {
    const gadget_catalog *c = gadget_catalog_def;
    size_t n = c == NULL ? 0 : c->prompt_count;
    ret->len = n;
    ret->ptr = must(calloc(n ? n : 1, sizeof *ret->ptr));
    for (size_t i = 0; i < n; i++) {
        const gadget_prompt *p = &c->prompts[i];
        exports_gadget_plugin_0_3_0_catalog_prompt_t *out = &ret->ptr[i];
        plugin_http_v3_string_dup(&out->name, p->name);
        gadget__set_option(&out->title, p->title);
        gadget__set_option(&out->description, p->description);
        out->arguments.len = p->argument_count;
        out->arguments.ptr = must(calloc(p->argument_count ? p->argument_count : 1,
                                         sizeof *out->arguments.ptr));
        for (size_t j = 0; j < p->argument_count; j++) {
            const gadget_prompt_argument *a = &p->arguments[j];
            exports_gadget_plugin_0_3_0_catalog_prompt_argument_t *arg = &out->arguments.ptr[j];
            plugin_http_v3_string_dup(&arg->name, a->name);
            gadget__set_option(&arg->description, a->description);
            arg->required = a->required;
            arg->examples.len = a->example_count;
            arg->examples.ptr =
                must(calloc(a->example_count ? a->example_count : 1, sizeof *arg->examples.ptr));
            for (size_t k = 0; k < a->example_count; k++)
                plugin_http_v3_string_dup(&arg->examples.ptr[k], a->examples[k]);
        }
    }
}

/* What a read gathers. */
struct gadget_read {
    gadget_call parts; /* its parts, as a result's (resource kinds only) */
    int refused;       /* 0, 1 not found, 2 failed */
    char *why;
};

void gadget_read_text(gadget_read *read, const char *uri, const char *mime_type, const char *text) {
    gadget_add_resource_text(&read->parts, uri, mime_type, text);
}

void gadget_read_blob(gadget_read *read, const char *uri, const char *mime_type,
                      const uint8_t *data, size_t len) {
    gadget_add_resource_blob(&read->parts, uri, mime_type, data, len);
}

gadget_status gadget_read_not_found(gadget_read *read) {
    read->refused = 1;
    return GADGET_ERROR;
}

gadget_status gadget_read_failed(gadget_read *read, const char *format, ...) {
    va_list args;
    va_start(args, format);
    free(read->why);
    read->why = gadget__vformat(format, args);
    va_end(args);
    read->refused = 2;
    return GADGET_ERROR;
}

bool exports_gadget_plugin_0_3_0_catalog_read_resource(
    plugin_http_v3_string_t *uri, exports_gadget_plugin_0_3_0_catalog_list_resource_contents_t *ret,
    exports_gadget_plugin_0_3_0_catalog_read_error_t *err) {
    char *uri_c = gadget__to_cstring(uri);
    plugin_http_v3_string_free(uri);
    gadget_read read = {0};
    const gadget_catalog *c = gadget_catalog_def;
    if (c == NULL || c->read == NULL) {
        read.refused = 1;
    } else {
        c->read(uri_c, &read);
    }
    free(uri_c);
    bool ok = read.refused == 0;
    if (ok) {
        ret->len = read.parts.part_count;
        ret->ptr = must(calloc(ret->len ? ret->len : 1, sizeof *ret->ptr));
        for (size_t i = 0; i < ret->len; i++) {
            gadget_plugin_0_3_0_types_content_t content;
            to_content(&read.parts.parts[i], &content);
            ret->ptr[i] = content.val.resource;
        }
    } else if (read.refused == 1) {
        err->tag = EXPORTS_GADGET_PLUGIN_0_3_0_CATALOG_READ_ERROR_NOT_FOUND;
    } else {
        err->tag = EXPORTS_GADGET_PLUGIN_0_3_0_CATALOG_READ_ERROR_FAILED;
        plugin_http_v3_string_dup(&err->val.failed, read.why == NULL ? "" : read.why);
    }
    gadget__parts_free(&read.parts);
    free(read.why);
    return ok;
}

/* What a prompt renders to. */
struct gadget_prompt_reply {
    char *description;
    gadget_call parts; /* one part per message */
    gadget_speaker *roles;
    char *failed;
};

static void prompt_role(gadget_prompt_reply *reply, gadget_speaker role) {
    reply->roles = must(realloc(reply->roles, reply->parts.part_count * sizeof *reply->roles));
    reply->roles[reply->parts.part_count - 1] = role;
}

void gadget_prompt_description(gadget_prompt_reply *reply, const char *description) {
    free(reply->description);
    reply->description = must(strdup(description));
}

void gadget_prompt_text(gadget_prompt_reply *reply, gadget_speaker role, const char *text) {
    gadget_add_text(&reply->parts, text);
    prompt_role(reply, role);
}

void gadget_prompt_image(gadget_prompt_reply *reply, gadget_speaker role, const char *mime_type,
                         const uint8_t *data, size_t len) {
    gadget_add_image(&reply->parts, mime_type, data, len);
    prompt_role(reply, role);
}

gadget_status gadget_prompt_failed(gadget_prompt_reply *reply, const char *format, ...) {
    va_list args;
    va_start(args, format);
    free(reply->failed);
    reply->failed = gadget__vformat(format, args);
    va_end(args);
    return GADGET_ERROR;
}

/* The (name, value) pairs as a JSON object of strings. */
static char *arguments_json(const plugin_http_v3_list_tuple2_string_string_t *arguments) {
    buffer b = {0};
    put(&b, "{", 1);
    for (size_t i = 0; i < arguments->len; i++) {
        if (i) put(&b, ",", 1);
        put_json_string(&b, (const char *)arguments->ptr[i].f0.ptr, arguments->ptr[i].f0.len);
        put(&b, ":", 1);
        put_json_string(&b, (const char *)arguments->ptr[i].f1.ptr, arguments->ptr[i].f1.len);
    }
    put(&b, "}", 1);
    return b.text;
}

bool exports_gadget_plugin_0_3_0_catalog_get_prompt(
    plugin_http_v3_string_t *name, plugin_http_v3_list_tuple2_string_string_t *arguments,
    exports_gadget_plugin_0_3_0_catalog_prompt_result_t *ret,
    exports_gadget_plugin_0_3_0_catalog_gadget_error_t *err) {
    char *name_c = gadget__to_cstring(name);
    char *args_c = arguments_json(arguments);
    plugin_http_v3_string_free(name);
    plugin_http_v3_list_tuple2_string_string_free(arguments);
    gadget_prompt_reply reply = {0};
    const gadget_catalog *c = gadget_catalog_def;
    if (c == NULL || c->prompt == NULL) {
        gadget_prompt_failed(&reply, "this component serves no prompt '%s'", name_c);
    } else {
        c->prompt(name_c, args_c, &reply);
    }
    bool ok = reply.failed == NULL;
    if (ok) {
        gadget__set_option(&ret->description, reply.description);
        ret->messages.len = reply.parts.part_count;
        ret->messages.ptr = must(calloc(ret->messages.len ? ret->messages.len : 1,
                                        sizeof *ret->messages.ptr));
        for (size_t i = 0; i < ret->messages.len; i++) {
            ret->messages.ptr[i].role = reply.roles[i] == GADGET_ASSISTANT
                                            ? EXPORTS_GADGET_PLUGIN_0_3_0_CATALOG_SPEAKER_ASSISTANT
                                            : EXPORTS_GADGET_PLUGIN_0_3_0_CATALOG_SPEAKER_USER;
            to_content(&reply.parts.parts[i], &ret->messages.ptr[i].content);
        }
    } else {
        err->tag = GADGET_PLUGIN_0_3_0_TYPES_GADGET_ERROR_FAILED;
        plugin_http_v3_string_dup(&err->val.failed, reply.failed);
    }
    gadget__parts_free(&reply.parts);
    free(reply.roles);
    free(reply.description);
    free(reply.failed);
    free(name_c);
    free(args_c);
    return ok;
}

/* The most completion values asked of a gadget (the host keeps 100). */
#define MAX_COMPLETIONS 100

void exports_gadget_plugin_0_3_0_catalog_complete(
    exports_gadget_plugin_0_3_0_catalog_completion_ref_t *reference,
    plugin_http_v3_string_t *argument, plugin_http_v3_string_t *value,
    plugin_http_v3_list_tuple2_string_string_t *context, plugin_http_v3_list_string_t *ret) {
    bool is_prompt = reference->tag == EXPORTS_GADGET_PLUGIN_0_3_0_CATALOG_COMPLETION_REF_PROMPT;
    char *reference_c =
        gadget__to_cstring(is_prompt ? &reference->val.prompt : &reference->val.resource);
    char *argument_c = gadget__to_cstring(argument);
    char *value_c = gadget__to_cstring(value);
    exports_gadget_plugin_0_3_0_catalog_completion_ref_free(reference);
    plugin_http_v3_string_free(argument);
    plugin_http_v3_string_free(value);
    plugin_http_v3_list_tuple2_string_string_free(context);
    const char *values[MAX_COMPLETIONS];
    size_t n = 0;
    const gadget_catalog *c = gadget_catalog_def;
    if (c != NULL && c->complete != NULL) {
        n = c->complete(is_prompt, reference_c, argument_c, value_c, values, MAX_COMPLETIONS);
        if (n > MAX_COMPLETIONS) n = MAX_COMPLETIONS;
    }
    ret->len = n;
    ret->ptr = must(calloc(n ? n : 1, sizeof *ret->ptr));
    for (size_t i = 0; i < n; i++) plugin_http_v3_string_dup(&ret->ptr[i], values[i]);
    free(reference_c);
    free(argument_c);
    free(value_c);
}
