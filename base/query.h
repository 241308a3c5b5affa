/* query.h - a URL query string's parameters ("a=1&b=2"), as the HTTP port hands them over:
 * decoded once by libwebsockets, its fragments joined by ',' (so '&' and ',' both end a
 * parameter; neither occurs in a value tlcap takes). Pure; any thread.
 */
#ifndef TLC_BASE_QUERY_H
#define TLC_BASE_QUERY_H

#include <stddef.h>

/* The value of parameter `key` in q into out (NUL-terminated). 1 found, 0 not, -1 bad: longer
 * than outlen - 1, or a '%' left in it (encoded twice). */
int tlc_query_param(const char *q, const char *key, char *out, size_t outlen);

/* The first parameter whose name is not in `known` (NULL-terminated) into bad (at most 64
 * bytes of its name). 1 if there is one, else 0. */
int tlc_query_unknown(const char *q, const char *const *known, char *bad, size_t badlen);

#endif
