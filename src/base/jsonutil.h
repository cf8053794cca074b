/*
 * jsonutil — small jansson helpers shared by the protocol parsers.
 */
#ifndef SBX_JSONUTIL_H
#define SBX_JSONUTIL_H

#include <jansson.h>

#include "base/buf.h"

/* Appends arr's string elements to out, sep between them once text was appended
 * (non-strings skipped). */
void sbx_json_join(const json_t *arr, const char *sep, struct sbx_buf *out);

/* The first key of obj not in known (NULL-terminated), or NULL: a config's or request's typo. */
const char *sbx_json_unknown_key(json_t *obj, const char *const known[]);

#endif
