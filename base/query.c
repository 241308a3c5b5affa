/* query.c - a URL query string's parameters (query.h). */
#include "base/query.h"

#include <stdio.h>
#include <string.h>

/* The length of the query's next parameter: up to '&' or ','. */
static size_t param_len(const char *q) {
  return strcspn(q, "&,");
}

int tlc_query_param(const char *q, const char *key, char *out, size_t outlen) {
  size_t kl = strlen(key);
  while (*q != '\0') {
    size_t n = param_len(q);
    if (n > kl && strncmp(q, key, kl) == 0 && q[kl] == '=') {
      size_t vl = n - kl - 1;
      if (vl + 1 > outlen || memchr(q + kl + 1, '%', vl) != NULL)
        return -1;
      memcpy(out, q + kl + 1, vl);
      out[vl] = '\0';
      return 1;
    }
    q += n;
    if (*q != '\0')
      q++;
  }
  return 0;
}

int tlc_query_unknown(const char *q, const char *const *known, char *bad, size_t badlen) {
  while (*q != '\0') {
    size_t n = param_len(q);
    const char *eq = memchr(q, '=', n);
    size_t kl = eq != NULL ? (size_t)(eq - q) : n;
    int ok = 0;
    for (size_t k = 0; known[k] != NULL; k++)
      ok |= kl == strlen(known[k]) && strncmp(q, known[k], kl) == 0;
    if (!ok && n > 0) {
      snprintf(bad, badlen, "%.*s", (int)(kl < 64 ? kl : 64), q);
      return 1;
    }
    q += n;
    if (*q != '\0')
      q++;
  }
  return 0;
}
