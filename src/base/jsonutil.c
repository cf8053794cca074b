/* jsonutil — see jsonutil.h. */
#include "base/jsonutil.h"

#include <string.h>

void sbx_json_join(const json_t *arr, const char *sep, struct sbx_buf *out)
{
	size_t i, start = out->len;
	json_t *x;
	json_array_foreach(arr, i, x)
	{
		if (!json_is_string(x))
			continue;
		if (out->len > start) /* as both callers did: no separator before text */
			sbx_buf_adds(out, sep);
		sbx_buf_add(out, json_string_value(x), json_string_length(x));
	}
}

const char *sbx_json_unknown_key(json_t *obj, const char *const known[])
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v)
	{
		size_t i = 0;
		while (known[i] && strcmp(known[i], k))
			i++;
		if (!known[i])
			return k;
	}
	return NULL;
}
