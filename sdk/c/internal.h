/*
 * internal.h: what gadget.c and content.c share; not for gadgets.
 */
#ifndef GADGET_SDK_INTERNAL_H
#define GADGET_SDK_INTERNAL_H

#include <stdarg.h>

#include "gadget.h"
#include "plugin_http_v3.h"

/* A NUL-terminated copy of a canonical-ABI string (malloc'd). */
char *gadget__to_cstring(const plugin_http_v3_string_t *s);
/* Sets an option<string> to a copy of s, or none for NULL. */
void gadget__set_option(plugin_http_v3_option_string_t *opt, const char *s);
/* printf into a malloc'd string. */
char *gadget__vformat(const char *format, va_list args);
/* The result's content: the text (when not empty), then the parts, and the
 * structured JSON; the copies belong to the result. */
void gadget__result_parts(const gadget_call *call, const char *text,
                          gadget_plugin_0_3_0_types_call_result_t *result);
/* Frees what the gadget_add_* functions kept. */
void gadget__parts_free(gadget_call *call);

#endif
