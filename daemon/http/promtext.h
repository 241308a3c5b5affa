/* promtext.h - the Prometheus text format's numbers, written straight into a buffer (inline:
 * /metrics writes millions of them per scrape). The family and label writers are in
 * promtext.c; metrics.c (the targets' series) and families.c (the daemon's) both use them.
 */
#ifndef TLC_HTTP_PROMTEXT_H
#define TLC_HTTP_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* Decimal digits of v at p; returns the end. */
static inline char *tlc__http_p_u64(char *p, uint64_t v) {
  char t[20];
  size_t k = 0;
  do {
    t[k++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (k > 0)
    *p++ = t[--k];
  return p;
}

/* Exact decimal seconds of ns at p (at most 31 bytes); returns the end. */
static inline char *tlc__http_p_seconds(char *p, int64_t ns) {
  uint64_t u, f;
  int k;
  if (ns < 0) {
    *p++ = '-';
    u = (uint64_t)(-(ns + 1)) + 1u;
  } else {
    u = (uint64_t)ns;
  }
  p = tlc__http_p_u64(p, u / 1000000000u);
  f = u % 1000000000u;
  if (f == 0)
    return p;
  for (k = 9; f % 10 == 0; k--) /* trailing zeros dropped */
    f /= 10;
  *p++ = '.';
  for (int j = k - 1; j >= 0; j--, f /= 10)
    p[j] = (char)('0' + f % 10);
  return p + k;
}

#endif
