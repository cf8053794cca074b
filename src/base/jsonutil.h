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

#endif
