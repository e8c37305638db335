/*
 * gadget.c: the C SDK's glue between gadget.h and the bindings wit-bindgen
 * generated for world plugin-http-v3 (contract wit/gadget@0.3.0/gadget.wit,
 * gen/plugin_http_v3.h): calls, parameters, host services, HTTP and the LLM.
 * Result parts, asking and the catalog are in content.c.
 *
 * Ownership, as the canonical ABI wants it: the strings the host passes to
 * `invoke` belong to us and are freed here; the strings we return are
 * copies (plugin_http_v3_string_dup) that the generated post-return functions free.
 */
#include "gadget.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "plugin_http_v3.h"

/* Provided by GADGET_EXPORT in the gadget's source. */
extern const gadget_def *const gadget_defs;
extern const size_t gadget_def_count;

enum {
    KIND_NONE,
    KIND_RESULT,
    KIND_FINISH,
    KIND_INVALID_ARGUMENTS,
    KIND_FAILED,
    KIND_CANCELLED,
};

/* ---- Strings ---- */

char *gadget__to_cstring(const plugin_http_v3_string_t *s) {
    char *out = malloc(s->len + 1);
    if (out == NULL) abort();
    memcpy(out, s->ptr, s->len);
    out[s->len] = '\0';
    return out;
}

void gadget__set_option(plugin_http_v3_option_string_t *opt, const char *s) {
    opt->is_some = s != NULL;
    if (s != NULL) plugin_http_v3_string_dup(&opt->val, s);
}

char *gadget__vformat(const char *format, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int len = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (len < 0) len = 0;
    char *out = malloc((size_t)len + 1);
    if (out == NULL) abort();
    vsnprintf(out, (size_t)len + 1, format, args);
    return out;
}

static gadget_status end(gadget_call *call, int kind, char *text) {
    free(call->text);
    call->kind = kind;
    call->text = text;
    return kind <= KIND_FINISH ? GADGET_OK : GADGET_ERROR;
}

#define END_WITH(kind)                                   \
    va_list args;                                        \
    va_start(args, format);                              \
    char *text = gadget__vformat(format, args);                  \
    va_end(args);                                        \
    return end(call, kind, text);

gadget_status gadget_result(gadget_call *call, const char *format, ...) { END_WITH(KIND_RESULT) }
gadget_status gadget_finish(gadget_call *call, const char *format, ...) { END_WITH(KIND_FINISH) }
/* llmist's ask-human outcome, on contract 0.3.0: asked with `ask`, and the
 * answer is the call's result. */
gadget_status gadget_ask_human(gadget_call *call, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *question = gadget__vformat(format, args);
    va_end(args);
    char *answer = NULL, *error = NULL;
    int asked = gadget_ask_text(question, &answer, &error);
    free(question);
    gadget_status status;
    if (asked == 0) {
        status = end(call, KIND_RESULT, answer);
    } else if (asked == 1) {
        status = gadget_failed(call, "the person declined to answer");
    } else if (asked == GADGET_ASK_CANCELLED) {
        status = gadget_cancelled(call);
    } else {
        status = gadget_failed(call, "the question could not be asked: %s",
                               error == NULL ? "no answer in time" : error);
    }
    free(error);
    return status;
}
gadget_status gadget_invalid_arguments(gadget_call *call, const char *format, ...) {
    END_WITH(KIND_INVALID_ARGUMENTS)
}
gadget_status gadget_failed(gadget_call *call, const char *format, ...) { END_WITH(KIND_FAILED) }

gadget_status gadget_cancelled(gadget_call *call) { return end(call, KIND_CANCELLED, NULL); }

void gadget_set_cost(gadget_call *call, double usd) {
    call->has_cost = true;
    call->cost = usd;
}

void gadget_set_details(gadget_call *call, const char *json) {
    free(call->details);
    call->details = json == NULL ? NULL : strdup(json);
}

/* ---- A small reader for the top-level members of a JSON object ----
 *
 * The host has validated the parameters against the schema, so the text is
 * well-formed JSON; the reader still never reads past the terminating NUL. */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Skips a JSON string starting at its opening quote; returns the character
 * after the closing quote, or NULL. */
static const char *skip_string(const char *p) {
    if (*p != '"') return NULL;
    for (p++; *p; p++) {
        if (*p == '\\') {
            if (!*++p) return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* Skips any JSON value; returns the character after it, or NULL. */
static const char *skip_value(const char *p) {
    p = skip_ws(p);
    if (*p == '"') return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                p = skip_string(p);
                if (p == NULL) return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') depth++;
            if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' &&
           *p != '\t')
        p++;
    return p;
}

/* Does the JSON string at p (at its quote) equal key, escapes and all?
 * Keys with escapes are compared after decoding only for \" and \\. */
static bool key_equals(const char *p, const char *key) {
    p++;
    while (*p && *p != '"') {
        char c = *p;
        if (c == '\\') {
            c = *++p;
            if (c != '"' && c != '\\' && c != '/') return false;
        }
        if (c != *key) return false;
        p++;
        key++;
    }
    return *p == '"' && *key == '\0';
}

/* The value of the top-level member `key`, or NULL. */
static const char *find_member(const char *json, const char *key) {
    const char *p = skip_ws(json);
    if (*p != '{') return NULL;
    p = skip_ws(p + 1);
    while (*p == '"') {
        bool match = key_equals(p, key);
        p = skip_string(p);
        if (p == NULL) return NULL;
        p = skip_ws(p);
        if (*p != ':') return NULL;
        p = skip_ws(p + 1);
        if (match) return p;
        p = skip_value(p);
        if (p == NULL) return NULL;
        p = skip_ws(p);
        if (*p != ',') return NULL;
        p = skip_ws(p + 1);
    }
    return NULL;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);
        if (d < 0) return false;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return true;
}

/* Appends code point cp as UTF-8; false when it does not fit. */
static bool put_utf8(char *buf, size_t cap, size_t *n, unsigned cp) {
    char tmp[4];
    size_t len;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        len = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        len = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        len = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        len = 4;
    }
    if (*n + len >= cap) return false;
    memcpy(buf + *n, tmp, len);
    *n += len;
    return true;
}

bool gadget_param_string(const gadget_call *call, const char *key, char *buf, size_t cap) {
    const char *p = find_member(call->params, key);
    if (p == NULL || *p != '"' || cap == 0) return false;
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        unsigned cp = (unsigned char)*p;
        if (*p == '\\') {
            p++;
            switch (*p) {
                case 'n': cp = '\n'; break;
                case 't': cp = '\t'; break;
                case 'r': cp = '\r'; break;
                case 'b': cp = '\b'; break;
                case 'f': cp = '\f'; break;
                case 'u': {
                    if (!read_hex4(p + 1, &cp)) return false;
                    p += 4;
                    /* A surrogate pair encodes one character. */
                    unsigned low;
                    if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u' &&
                        read_hex4(p + 3, &low) && low >= 0xDC00 && low < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        p += 6;
                    }
                    if (!put_utf8(buf, cap, &n, cp)) return false;
                    continue;
                }
                case '\0': return false;
                default: cp = (unsigned char)*p; break; /* \" \\ \/ */
            }
        }
        if (n + 1 >= cap) return false;
        buf[n++] = (char)cp;
    }
    if (*p != '"') return false;
    buf[n] = '\0';
    return true;
}

bool gadget_param_number(const gadget_call *call, const char *key, double *out) {
    const char *p = find_member(call->params, key);
    if (p == NULL || !(*p == '-' || (*p >= '0' && *p <= '9'))) return false;
    char *end;
    double value = strtod(p, &end);
    if (end == p) return false;
    *out = value;
    return true;
}

bool gadget_param_bool(const gadget_call *call, const char *key, bool *out) {
    const char *p = find_member(call->params, key);
    if (p == NULL) return false;
    if (strncmp(p, "true", 4) == 0) {
        *out = true;
        return true;
    }
    if (strncmp(p, "false", 5) == 0) {
        *out = false;
        return true;
    }
    return false;
}

/* ---- Host services ---- */

void gadget_log(gadget_level level, const char *message, const char *fields_json) {
    plugin_http_v3_string_t msg, fields;
    plugin_http_v3_string_set(&msg, message);
    plugin_http_v3_string_set(&fields, fields_json == NULL ? "" : fields_json);
    gadget_plugin_0_3_0_host_log((gadget_plugin_0_3_0_host_level_t)level, &msg, &fields);
}

void gadget_info(const char *message) { gadget_log(GADGET_INFO, message, NULL); }
void gadget_warn(const char *message) { gadget_log(GADGET_WARN, message, NULL); }

void gadget_report_cost(double usd) { gadget_plugin_0_3_0_host_report_cost(usd); }

void gadget_progress(const char *message) {
    plugin_http_v3_string_t msg;
    plugin_http_v3_string_set(&msg, message);
    gadget_plugin_0_3_0_host_progress(&msg);
}

bool gadget_is_cancelled(void) { return gadget_plugin_0_3_0_host_cancelled(); }

uint64_t gadget_time_left_ms(void) {
    gadget_plugin_0_3_0_host_invocation_info_t info;
    gadget_plugin_0_3_0_host_call_info(&info);
    uint64_t left = info.time_left_ms;
    gadget_plugin_0_3_0_host_invocation_info_free(&info);
    return left;
}

/* ---- The component's exports ---- */

void exports_gadget_plugin_0_3_0_gadget_specs(exports_gadget_plugin_0_3_0_gadget_list_gadget_spec_t *ret) {
    ret->len = gadget_def_count;
    ret->ptr = calloc(gadget_def_count ? gadget_def_count : 1, sizeof *ret->ptr);
    if (ret->ptr == NULL) abort();
    for (size_t i = 0; i < gadget_def_count; i++) {
        const gadget_def *def = &gadget_defs[i];
        exports_gadget_plugin_0_3_0_gadget_gadget_spec_t *spec = &ret->ptr[i];
        plugin_http_v3_string_dup(&spec->name, def->name);
        gadget__set_option(&spec->label, def->label);
        plugin_http_v3_string_dup(&spec->description, def->description);
        plugin_http_v3_string_dup(&spec->parameters_schema, def->schema == NULL ? "" : def->schema);
        spec->examples.len = def->example_count;
        spec->examples.ptr =
            calloc(def->example_count ? def->example_count : 1, sizeof *spec->examples.ptr);
        if (spec->examples.ptr == NULL) abort();
        for (size_t j = 0; j < def->example_count; j++) {
            const gadget_example *ex = &def->examples[j];
            plugin_http_v3_string_dup(&spec->examples.ptr[j].params, ex->params);
            gadget__set_option(&spec->examples.ptr[j].output, ex->output);
            gadget__set_option(&spec->examples.ptr[j].comment, ex->comment);
        }
        spec->timeout_ms.is_some = def->timeout_ms > 0;
        spec->timeout_ms.val = def->timeout_ms;
        spec->exclusive = def->exclusive;
        spec->max_concurrent.is_some = def->max_concurrent > 0;
        spec->max_concurrent.val = def->max_concurrent;
    }
}

bool exports_gadget_plugin_0_3_0_gadget_invoke(plugin_http_v3_string_t *invocation_id, plugin_http_v3_string_t *name,
                                         plugin_http_v3_string_t *params,
                                         exports_gadget_plugin_0_3_0_gadget_outcome_t *ret,
                                         exports_gadget_plugin_0_3_0_gadget_gadget_error_t *err) {
    gadget_call call = {0};
    char *id_c = gadget__to_cstring(invocation_id);
    char *name_c = gadget__to_cstring(name);
    char *params_c = gadget__to_cstring(params);
    plugin_http_v3_string_free(invocation_id);
    plugin_http_v3_string_free(name);
    plugin_http_v3_string_free(params);
    call.invocation_id = id_c;
    call.name = name_c;
    call.params = params_c;

    const gadget_def *def = NULL;
    for (size_t i = 0; i < gadget_def_count; i++) {
        if (strcmp(gadget_defs[i].name, name_c) == 0) def = &gadget_defs[i];
    }
    if (def == NULL) {
        gadget_failed(&call, "this component has no gadget '%s'", name_c);
    } else {
        def->invoke(&call);
        if (call.kind == KIND_NONE) {
            gadget_failed(&call, "gadget '%s' returned without gadget_result or an error", name_c);
        }
    }

    bool ok = true;
    const char *text = call.text == NULL ? "" : call.text;
    switch (call.kind) {
        case KIND_RESULT:
        case KIND_FINISH: {
            ret->tag = call.kind == KIND_RESULT ? GADGET_PLUGIN_0_3_0_TYPES_OUTCOME_RESULT
                                                : GADGET_PLUGIN_0_3_0_TYPES_OUTCOME_FINISH;
            gadget_plugin_0_3_0_types_call_result_t *r =
                call.kind == KIND_RESULT ? &ret->val.result : &ret->val.finish;
            gadget__result_parts(&call, text, r);
            r->cost.is_some = call.has_cost;
            r->cost.val = call.cost;
            gadget__set_option(&r->details, call.details);
            break;
        }
        case KIND_INVALID_ARGUMENTS:
            ok = false;
            err->tag = GADGET_PLUGIN_0_3_0_TYPES_GADGET_ERROR_INVALID_ARGUMENTS;
            plugin_http_v3_string_dup(&err->val.invalid_arguments, text);
            break;
        case KIND_CANCELLED:
            ok = false;
            err->tag = GADGET_PLUGIN_0_3_0_TYPES_GADGET_ERROR_CANCELLED;
            break;
        default:
            ok = false;
            err->tag = GADGET_PLUGIN_0_3_0_TYPES_GADGET_ERROR_FAILED;
            plugin_http_v3_string_dup(&err->val.failed, text);
            break;
    }
    free(call.text);
    free(call.details);
    gadget__parts_free(&call);
    free(id_c);
    free(name_c);
    free(params_c);
    return ok;
}

/* ---- Configuration and HTTP ---- */

const char *gadget_config(const char *key) { return getenv(key); }

static char *http_message(const char *text) {
    char *copy = strdup(text);
    return copy;
}

static int http_failure(const wasi_http_types_error_code_t *code, char **error) {
    char buf[160];
    switch (code->tag) {
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_DENIED:
        *error = http_message("the host refused the request (the call's log says why and what "
                              "would allow it: an origin or address not granted, the call's "
                              "request cap, or a secret's placeholder where the secret may not go)");
        return GADGET_HTTP_DENIED;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_BODY_SIZE:
        snprintf(buf, sizeof buf, "the response body is over the host's %llu-byte limit",
                 (unsigned long long)(code->val.http_response_body_size.is_some
                                          ? code->val.http_response_body_size.val
                                          : 0));
        *error = http_message(buf);
        return -1;
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_TIMEOUT:
        *error = http_message("timed out (the call's deadline, or the connection)");
        return -1;
    default:
        snprintf(buf, sizeof buf, "request failed (wasi:http error code %d)", code->tag);
        *error = http_message(buf);
        return -1;
    }
}

static char *header_value(wasi_http_types_list_tuple2_field_name_field_value_t *entries,
                          const char *name) {
    for (size_t i = 0; i < entries->len; i++) {
        plugin_http_v3_string_t *key = &entries->ptr[i].f0;
        if (key->len == strlen(name) && strncasecmp((const char *)key->ptr, name, key->len) == 0) {
            wasi_http_types_field_value_t *v = &entries->ptr[i].f1;
            char *out = malloc(v->len + 1);
            memcpy(out, v->ptr, v->len);
            out[v->len] = 0;
            return out;
        }
    }
    return NULL;
}

int gadget_http_get(const char *url, const char *const *headers, gadget_http_response *out,
                    char **error) {
    memset(out, 0, sizeof *out);
    *error = NULL;
    const char *sep = strstr(url, "://");
    if (!sep) {
        *error = http_message("invalid URL: no scheme");
        return -1;
    }
    wasi_http_types_scheme_t scheme;
    if ((size_t)(sep - url) == 5 && strncasecmp(url, "https", 5) == 0) {
        scheme.tag = WASI_HTTP_TYPES_SCHEME_HTTPS;
    } else if ((size_t)(sep - url) == 4 && strncasecmp(url, "http", 4) == 0) {
        scheme.tag = WASI_HTTP_TYPES_SCHEME_HTTP;
    } else {
        *error = http_message("invalid URL: the scheme is not http or https");
        return -1;
    }
    const char *rest = sep + 3;
    size_t authority_len = strcspn(rest, "/?");
    char path[4096];
    snprintf(path, sizeof path, "%s%s", rest[authority_len] == '?' ? "/" : "",
             rest[authority_len] ? rest + authority_len : "/");

    size_t count = 0;
    while (headers && headers[2 * count]) count++;
    wasi_http_types_tuple2_field_name_field_value_t pairs[count ? count : 1];
    for (size_t i = 0; i < count; i++) {
        pairs[i].f0.ptr = (uint8_t *)headers[2 * i];
        pairs[i].f0.len = strlen(headers[2 * i]);
        pairs[i].f1.ptr = (uint8_t *)headers[2 * i + 1];
        pairs[i].f1.len = strlen(headers[2 * i + 1]);
    }
    wasi_http_types_list_tuple2_field_name_field_value_t list = {pairs, count};
    wasi_http_types_own_fields_t fields;
    wasi_http_types_header_error_t header_error;
    if (!wasi_http_types_static_fields_from_list(&list, &fields, &header_error)) {
        *error = http_message("a header is not valid (or not allowed)");
        return -1;
    }
    wasi_http_types_own_outgoing_request_t request =
        wasi_http_types_constructor_outgoing_request(fields);
    wasi_http_types_borrow_outgoing_request_t borrowed =
        wasi_http_types_borrow_outgoing_request(request);
    wasi_http_types_method_t method = {.tag = WASI_HTTP_TYPES_METHOD_GET};
    plugin_http_v3_string_t authority = {(uint8_t *)rest, authority_len};
    plugin_http_v3_string_t path_with_query = {(uint8_t *)path, strlen(path)};
    wasi_http_types_own_outgoing_body_t body;
    if (!wasi_http_types_method_outgoing_request_set_method(borrowed, &method) ||
        !wasi_http_types_method_outgoing_request_set_scheme(borrowed, &scheme) ||
        !wasi_http_types_method_outgoing_request_set_authority(borrowed, &authority) ||
        !wasi_http_types_method_outgoing_request_set_path_with_query(borrowed, &path_with_query) ||
        !wasi_http_types_method_outgoing_request_body(borrowed, &body)) {
        wasi_http_types_outgoing_request_drop_own(request);
        *error = http_message("invalid URL");
        return -1;
    }
    wasi_http_outgoing_handler_own_future_incoming_response_t future;
    wasi_http_outgoing_handler_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(request, NULL, &future, &code)) {
        wasi_http_types_outgoing_body_drop_own(body);
        int rc = http_failure(&code, error);
        wasi_http_types_error_code_free(&code);
        return rc;
    }
    wasi_http_types_error_code_t finish_error;
    if (!wasi_http_types_static_outgoing_body_finish(body, NULL, &finish_error)) {
        wasi_http_types_error_code_free(&finish_error);
    }
    wasi_http_types_borrow_future_incoming_response_t waiting =
        wasi_http_types_borrow_future_incoming_response(future);
    wasi_io_poll_own_pollable_t ready =
        wasi_http_types_method_future_incoming_response_subscribe(waiting);
    wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
    wasi_io_poll_pollable_drop_own(ready);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t answer;
    bool some = wasi_http_types_method_future_incoming_response_get(waiting, &answer);
    wasi_http_types_future_incoming_response_drop_own(future);
    if (!some || answer.is_err) {
        *error = http_message("no response");
        return -1;
    }
    if (answer.val.ok.is_err) {
        int rc = http_failure(&answer.val.ok.val.err, error);
        wasi_http_types_error_code_free(&answer.val.ok.val.err);
        return rc;
    }
    wasi_http_types_own_incoming_response_t response = answer.val.ok.val.ok;
    wasi_http_types_borrow_incoming_response_t r = wasi_http_types_borrow_incoming_response(response);
    out->status = wasi_http_types_method_incoming_response_status(r);
    wasi_http_types_own_headers_t response_headers = wasi_http_types_method_incoming_response_headers(r);
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(response_headers), &entries);
    out->content_type = header_value(&entries, "content-type");
    out->location = header_value(&entries, "location");
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
    wasi_http_types_fields_drop_own(response_headers);

    wasi_http_types_own_incoming_body_t incoming;
    if (!wasi_http_types_method_incoming_response_consume(r, &incoming)) {
        wasi_http_types_incoming_response_drop_own(response);
        *error = http_message("the response has no body");
        return -1;
    }
    wasi_http_types_own_input_stream_t stream;
    wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(incoming), &stream);
    size_t cap = 65536, len = 0;
    char *bytes = malloc(cap + 1);
    int rc = 0;
    for (;;) {
        plugin_http_v3_list_u8_t chunk;
        wasi_io_streams_stream_error_t stream_error;
        if (!wasi_io_streams_method_input_stream_blocking_read(
                wasi_io_streams_borrow_input_stream(stream), 65536, &chunk, &stream_error)) {
            if (stream_error.tag != WASI_IO_STREAMS_STREAM_ERROR_CLOSED) {
                wasi_http_types_error_code_t failure;
                wasi_http_types_borrow_io_error_t io_error = {stream_error.val.last_operation_failed.__handle};
                if (wasi_http_types_http_error_code(io_error, &failure)) {
                    rc = http_failure(&failure, error);
                    wasi_http_types_error_code_free(&failure);
                } else {
                    *error = http_message("reading the body failed");
                    rc = -1;
                }
            }
            wasi_io_streams_stream_error_free(&stream_error);
            break;
        }
        if (len + chunk.len > cap) {
            while (len + chunk.len > cap) cap *= 2;
            bytes = realloc(bytes, cap + 1);
        }
        memcpy(bytes + len, chunk.ptr, chunk.len);
        len += chunk.len;
        plugin_http_v3_list_u8_free(&chunk);
    }
    wasi_io_streams_input_stream_drop_own(stream);
    wasi_http_types_incoming_body_drop_own(incoming);
    wasi_http_types_incoming_response_drop_own(response);
    bytes[len] = 0;
    if (rc != 0) {
        free(bytes);
        gadget_http_response_free(out);
        return rc;
    }
    out->body = bytes;
    out->body_len = len;
    return 0;
}

void gadget_http_response_free(gadget_http_response *response) {
    free(response->body);
    free(response->content_type);
    free(response->location);
    memset(response, 0, sizeof *response);
}

/* ---- The host's LLM ---- */

int gadget_llm_complete(const char *system, const char *user, const char *model,
                        uint32_t max_tokens, gadget_completion *out, char **error) {
    memset(out, 0, sizeof *out);
    *error = NULL;
    gadget_plugin_0_3_0_llm_message_t messages[2];
    size_t count = 0;
    if (system) {
        messages[count].role = GADGET_PLUGIN_0_3_0_LLM_ROLE_SYSTEM;
        messages[count].content.ptr = (uint8_t *)system;
        messages[count].content.len = strlen(system);
        count++;
    }
    messages[count].role = GADGET_PLUGIN_0_3_0_LLM_ROLE_USER;
    messages[count].content.ptr = (uint8_t *)user;
    messages[count].content.len = strlen(user);
    count++;
    gadget_plugin_0_3_0_llm_completion_request_t request = {0};
    request.messages.ptr = messages;
    request.messages.len = count;
    if (model) {
        request.model.is_some = true;
        request.model.val.ptr = (uint8_t *)model;
        request.model.val.len = strlen(model);
    }
    if (max_tokens) {
        request.max_tokens.is_some = true;
        request.max_tokens.val = max_tokens;
    }
    gadget_plugin_0_3_0_llm_completion_t answer;
    gadget_plugin_0_3_0_llm_llm_error_t failure;
    if (!gadget_plugin_0_3_0_llm_complete(&request, &answer, &failure)) {
        const char *what = "LLM provider failed: ";
        const plugin_http_v3_string_t *detail = &failure.val.provider;
        switch (failure.tag) {
        case GADGET_PLUGIN_0_3_0_LLM_LLM_ERROR_DENIED:
            what = "LLM denied: ";
            detail = &failure.val.denied;
            break;
        case GADGET_PLUGIN_0_3_0_LLM_LLM_ERROR_BUDGET_EXCEEDED:
            what = "LLM budget exceeded: ";
            detail = &failure.val.budget_exceeded;
            break;
        case GADGET_PLUGIN_0_3_0_LLM_LLM_ERROR_PROVIDER:
            break;
        default:
            gadget_plugin_0_3_0_llm_llm_error_free(&failure);
            return GADGET_LLM_DEADLINE;
        }
        size_t len = strlen(what) + detail->len + 1;
        *error = malloc(len);
        if (*error) {
            snprintf(*error, len, "%s%.*s", what, (int)detail->len, (const char *)detail->ptr);
        }
        gadget_plugin_0_3_0_llm_llm_error_free(&failure);
        return -1;
    }
    out->text = gadget__to_cstring(&answer.text);
    out->model = gadget__to_cstring(&answer.model);
    out->input_tokens = answer.input_tokens;
    out->output_tokens = answer.output_tokens;
    out->cost = answer.cost;
    gadget_plugin_0_3_0_llm_completion_free(&answer);
    return 0;
}

void gadget_completion_free(gadget_completion *completion) {
    free(completion->text);
    free(completion->model);
    completion->text = completion->model = NULL;
}
