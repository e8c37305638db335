/*
 * Contract 0.3.0 in C, one feature per item (the Rust and Python twins are
 * examples/palette and examples/python-palette):
 *
 * - CSwatch asks twice (a form, then a text question) and returns an image
 *   (a PNG it draws) with a text part and structured JSON;
 * - CBlend reports numeric progress while it works;
 * - the catalog serves the colours as a resource, every swatch through a URI
 *   template (cpalette://swatch/{colour}), and a prompt whose argument
 *   completes from its examples.
 *
 * Build and try it (the person at the terminal answers, or --answers):
 *
 *     gadget build examples/c-palette
 *     gadget --plugins examples/c-palette call CSwatch --params '{}'
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gadget.h"

typedef struct {
    const char *name;
    unsigned char rgb[3];
} colour;

static const colour COLOURS[] = {
    {"red", {0xE0, 0x1B, 0x24}},   {"green", {0x2E, 0xC2, 0x7E}}, {"blue", {0x1C, 0x71, 0xD8}},
    {"yellow", {0xF6, 0xD3, 0x2D}}, {"black", {0, 0, 0}},          {"white", {0xFF, 0xFF, 0xFF}},
};
#define COLOUR_COUNT (sizeof COLOURS / sizeof COLOURS[0])
static const char *const COLOUR_NAMES[] = {"red", "green", "blue", "yellow", "black", "white"};

/* The largest swatch, in pixels a side: big enough to see, small enough that
 * one stored deflate block holds it and the result stays far under the
 * host's result limit. */
#define MAX_SIDE_PX 128

static const colour *find_colour(const char *name) {
    for (size_t i = 0; i < COLOUR_COUNT; i++)
        if (strcmp(COLOURS[i].name, name) == 0) return &COLOURS[i];
    return NULL;
}

/* ---- A PNG of one colour (stored deflate: no compression library) ---- */

static unsigned long crc32_of(const unsigned char *data, size_t len, unsigned long crc) {
    crc = ~crc & 0xFFFFFFFFul;
    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320ul & (0ul - (crc & 1)));
    }
    return ~crc & 0xFFFFFFFFul;
}

static unsigned char *put32(unsigned char *p, unsigned long v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
    return p + 4;
}

static unsigned char *chunk(unsigned char *p, const char *kind, const unsigned char *data, size_t len) {
    p = put32(p, (unsigned long)len);
    unsigned char *typed = p;
    memcpy(p, kind, 4);
    if (len) memcpy(p + 4, data, len);
    p += 4 + len;
    return put32(p, crc32_of(typed, len + 4, 0));
}

/* A side x side square of rgb as an 8-bit RGB PNG; *len gets its size. */
static unsigned char *png(int side, const unsigned char rgb[3], size_t *len) {
    size_t row = 1 + 3 * (size_t)side, raw_len = row * (size_t)side;
    unsigned char *raw = malloc(raw_len);
    for (int y = 0; y < side; y++) {
        raw[y * row] = 0;
        for (int x = 0; x < side; x++) memcpy(raw + y * row + 1 + 3 * x, rgb, 3);
    }
    /* zlib: header, one stored block, Adler-32. */
    size_t z_len = 2 + 5 + raw_len + 4;
    unsigned char *z = malloc(z_len), *q = z;
    *q++ = 0x78, *q++ = 0x01, *q++ = 0x01;
    *q++ = (unsigned char)raw_len, *q++ = (unsigned char)(raw_len >> 8);
    *q++ = (unsigned char)~raw_len, *q++ = (unsigned char)(~raw_len >> 8);
    memcpy(q, raw, raw_len);
    q += raw_len;
    unsigned long a = 1, b = 0;
    for (size_t i = 0; i < raw_len; i++) a = (a + raw[i]) % 65521, b = (b + a) % 65521;
    put32(q, (b << 16) | a);
    free(raw);
    unsigned char header[13];
    put32(header, (unsigned long)side);
    put32(header + 4, (unsigned long)side);
    header[8] = 8, header[9] = 2, header[10] = header[11] = header[12] = 0;
    unsigned char *out = malloc(8 + 12 + 13 + 12 + z_len + 12), *p = out;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p = chunk(p + 8, "IHDR", header, 13);
    p = chunk(p, "IDAT", z, z_len);
    p = chunk(p, "IEND", NULL, 0);
    free(z);
    *len = (size_t)(p - out);
    return out;
}

/* ---- The gadgets ---- */

/* The string member key of a JSON object (enough for a form's answer). */
static int json_string_member(const char *json, const char *key, char *out, size_t cap) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *at = strstr(json, pattern);
    if (at == NULL) return 0;
    at = strchr(at + strlen(pattern), '"');
    if (at == NULL) return 0;
    const char *end = strchr(at + 1, '"');
    if (end == NULL || (size_t)(end - at - 1) >= cap) return 0;
    memcpy(out, at + 1, (size_t)(end - at - 1));
    out[end - at - 1] = '\0';
    return 1;
}

static gadget_status swatch(gadget_call *call) {
    /* Ask before acting: over stateless HTTP the gadget runs again from the
     * start with the answers so far. */
    gadget_question first = {
        .key = "colour",
        .kind = GADGET_QUESTION_FORM,
        .text = "Which colour should the swatch be?",
        .schema = "{\"type\":\"object\",\"properties\":{\"colour\":{\"type\":\"string\",\"enum\":"
                  "[\"red\",\"green\",\"blue\",\"yellow\",\"black\",\"white\"]}},"
                  "\"required\":[\"colour\"]}",
    };
    gadget_answer answer;
    char *error = NULL;
    int asked = gadget_ask(&first, 1, &answer, &error);
    if (asked == GADGET_ASK_CANCELLED) return gadget_cancelled(call);
    if (asked != 0) {
        gadget_status failed = gadget_failed(call, "could not ask: %s", error ? error : "no answer");
        free(error);
        return failed;
    }
    char name[32] = "";
    int chosen = answer.kind == GADGET_ANSWER_FORM &&
                 json_string_member(answer.value, "colour", name, sizeof name);
    gadget_answers_free(&answer, 1);
    if (!chosen) return gadget_failed(call, "no colour was chosen");
    const colour *c = find_colour(name);
    if (c == NULL) return gadget_invalid_arguments(call, "unknown colour '%s'", name);

    char question[64], *side_text = NULL;
    snprintf(question, sizeof question, "How many pixels a side (1 to %d)?", MAX_SIDE_PX);
    asked = gadget_ask_text(question, &side_text, &error);
    if (asked == GADGET_ASK_CANCELLED) return gadget_cancelled(call);
    if (asked < 0) {
        gadget_status failed = gadget_failed(call, "could not ask: %s", error ? error : "no answer");
        free(error);
        return failed;
    }
    int side = asked == 0 ? atoi(side_text) : 0;
    free(side_text);
    if (side < 1 || side > MAX_SIDE_PX)
        return gadget_invalid_arguments(call, "the side must be a whole number from 1 to %d",
                                        MAX_SIDE_PX);
    size_t len;
    unsigned char *image = png(side, c->rgb, &len);
    gadget_add_image(call, "image/png", image, len);
    free(image);
    char structured[96];
    snprintf(structured, sizeof structured, "{\"colour\":\"%s\",\"side\":%d}", name, side);
    gadget_set_structured(call, structured);
    gadget_info("drew a swatch");
    return gadget_result(call, "A %dx%d %s swatch.", side, side, name);
}

static gadget_status blend(gadget_call *call) {
    char from_name[32], to_name[32];
    double steps = 5;
    if (!gadget_param_string(call, "from", from_name, sizeof from_name) ||
        !gadget_param_string(call, "to", to_name, sizeof to_name))
        return gadget_invalid_arguments(call, "from and to must be colour names");
    gadget_param_number(call, "steps", &steps);
    const colour *from = find_colour(from_name), *to = find_colour(to_name);
    if (from == NULL || to == NULL)
        return gadget_invalid_arguments(call, "unknown colour; known: red, green, blue, yellow, black, white");
    if (steps < 2 || steps > 50) return gadget_invalid_arguments(call, "steps must be from 2 to 50");
    int n = (int)steps;
    char codes[50 * 8 + 1] = "";
    for (int step = 0; step < n; step++) {
        if (gadget_is_cancelled()) return gadget_cancelled(call);
        char code[9], message[32];
        unsigned char mix[3];
        for (int k = 0; k < 3; k++)
            mix[k] = (unsigned char)(from->rgb[k] + (to->rgb[k] - from->rgb[k]) * step / (n - 1));
        snprintf(code, sizeof code, "%s#%02x%02x%02x", step ? " " : "", mix[0], mix[1], mix[2]);
        strcat(codes, code);
        snprintf(message, sizeof message, "step %d of %d", step + 1, n);
        gadget_report_progress(step + 1, n, message);
    }
    return gadget_result(call, "%s", codes);
}

static const gadget_example blend_examples[] = {
    {.params = "{\"from\": \"black\", \"to\": \"white\", \"steps\": 3}", .output = "#000000 #7f7f7f #ffffff"},
};

static const gadget_def gadgets[] = {
    {
        .name = "CSwatch",
        .description = "Asks the person which colour and how big, then returns a square swatch of it as a PNG image.",
        .schema = "{\"type\":\"object\",\"properties\":{}}",
        .invoke = swatch,
    },
    {
        .name = "CBlend",
        .description = "Blends one named colour into another in even steps and lists the hex codes.",
        .schema = "{\"type\":\"object\",\"properties\":{"
                  "\"from\":{\"type\":\"string\",\"description\":\"The first colour's name.\"},"
                  "\"to\":{\"type\":\"string\",\"description\":\"The second colour's name.\"},"
                  "\"steps\":{\"type\":\"integer\",\"description\":\"How many steps (2 to 50).\",\"default\":5}},"
                  "\"required\":[\"from\",\"to\"]}",
        .examples = blend_examples,
        .example_count = 1,
        .invoke = blend,
    },
};
GADGET_EXPORT(gadgets)

/* ---- The catalog ---- */

#define SWATCH_PREFIX "cpalette://swatch/"

static gadget_status read_resource(const char *uri, gadget_read *out) {
    if (strcmp(uri, "cpalette://colours") == 0) {
        char json[256] = "{";
        for (size_t i = 0; i < COLOUR_COUNT; i++) {
            char entry[40];
            snprintf(entry, sizeof entry, "%s\"%s\": \"#%02x%02x%02x\"", i ? ", " : "", COLOURS[i].name,
                     COLOURS[i].rgb[0], COLOURS[i].rgb[1], COLOURS[i].rgb[2]);
            strcat(json, entry);
        }
        strcat(json, "}");
        gadget_read_text(out, uri, "application/json", json);
        return GADGET_OK;
    }
    if (strncmp(uri, SWATCH_PREFIX, strlen(SWATCH_PREFIX)) == 0) {
        const colour *c = find_colour(uri + strlen(SWATCH_PREFIX));
        if (c == NULL) return gadget_read_not_found(out);
        size_t len;
        unsigned char *image = png(16, c->rgb, &len);
        gadget_read_blob(out, uri, "image/png", image, len);
        free(image);
        return GADGET_OK;
    }
    return gadget_read_not_found(out);
}

static gadget_status paint(const char *name, const char *arguments_json, gadget_prompt_reply *out) {
    char colour_name[32];
    if (!json_string_member(arguments_json, "colour", colour_name, sizeof colour_name))
        return gadget_prompt_failed(out, "name a colour");
    const colour *c = find_colour(colour_name);
    if (c == NULL) return gadget_prompt_failed(out, "unknown colour '%s'", colour_name);
    char text[96];
    snprintf(text, sizeof text, "Describe, in two sentences, a quiet room painted %s.", colour_name);
    gadget_prompt_text(out, GADGET_USER, text);
    size_t len;
    unsigned char *image = png(16, c->rgb, &len);
    gadget_prompt_image(out, GADGET_USER, "image/png", image, len);
    free(image);
    (void)name;
    return GADGET_OK;
}

static const gadget_resource resources[] = {{
    .uri = "cpalette://colours",
    .name = "colours",
    .description = "Every colour this plugin knows, with its hex code",
    .mime_type = "application/json",
    .size = -1,
}};

static const gadget_resource_template templates[] = {{
    .uri_template = "cpalette://swatch/{colour}",
    .name = "swatch",
    .description = "A 16x16 PNG swatch of a named colour",
    .mime_type = "image/png",
}};

static const gadget_prompt_argument paint_arguments[] = {{
    .name = "colour",
    .description = "The colour's name",
    .required = true,
    .examples = COLOUR_NAMES,
    .example_count = COLOUR_COUNT,
}};

static const gadget_prompt prompts[] = {{
    .name = "c-paint",
    .description = "Asks the model to describe a room painted in a colour",
    .arguments = paint_arguments,
    .argument_count = 1,
}};

static const gadget_catalog catalog = {
    .resources = resources,
    .resource_count = 1,
    .templates = templates,
    .template_count = 1,
    .prompts = prompts,
    .prompt_count = 1,
    .read = read_resource,
    .prompt = paint,
};
GADGET_EXPORT_CATALOG(catalog)
