/* when.c - the time spellings of SPEC section 10 (when.h).
 *
 * One parser for every place a user writes a history bound: `tlcapd replay --since`, `tlcap
 * stats --since`, `tlcap watch --since`, the HTTP query `?since=`. Relative times are resolved
 * against the `now` the caller passes (the client's clock for the CLI, the daemon's for HTTP).
 * Does not validate the calendar beyond field ranges (timegm normalises 31 February).
 */
#define _GNU_SOURCE /* timegm */
#include "formats/when.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_i64(const char *s, int64_t *v) {
  char *end;
  long long x;
  errno = 0;
  x = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return -1;
  *v = x;
  return 0;
}

static int parse_relative(const char *s, int64_t now_ns, int64_t *v) {
  char *end;
  double x;
  errno = 0;
  x = strtod(s + 1, &end);
  if (errno != 0 || end == s + 1 || !(x >= 0) || x > 1e9 || s[1] == '-' || s[1] == '+')
    return -1;
  if (strcmp(end, "s") == 0 || *end == '\0')
    ;
  else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
    x *= 60;
  else if (strcmp(end, "h") == 0)
    x *= 3600;
  else if (strcmp(end, "d") == 0)
    x *= 86400;
  else if (strcmp(end, "ms") == 0)
    x /= 1e3;
  else
    return -1;
  if (x > 9e9) /* about 285 years: more would not fit in int64 ns (nor mean anything) */
    return -1;
  *v = now_ns - (int64_t)(x * 1e9);
  return 0;
}

static int parse_rfc3339(const char *s, int64_t *v) {
  struct tm tm;
  int n = 0, fd = 0;
  long long frac = 0;
  const char *p;
  time_t secs;
  memset(&tm, 0, sizeof(tm));
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &n) != 6 ||
      n != 19)
    return -1;
  p = s + n;
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++, fd++)
      if (fd < 9)
        frac = frac * 10 + (*p - '0');
    if (fd == 0)
      return -1;
    for (int k = fd; k < 9; k++)
      frac *= 10;
  }
  if (strcmp(p, "Z") != 0 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1678 ||
      tm.tm_year > 2261) /* the int64 ns range */
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  secs = timegm(&tm);
  *v = (int64_t)secs * 1000000000ll + frac;
  return 0;
}

int tlc_when_parse(const char *s, int64_t now_ns, int *kind, int64_t *v) {
  int64_t epoch;
  return tlc_when_parse_epoch(s, now_ns, kind, v, &epoch);
}

int tlc_when_parse_epoch(const char *s, int64_t now_ns, int *kind, int64_t *v, int64_t *epoch) {
  *epoch = -1;
  if (s == NULL)
    return -1;
  if (strncmp(s, "epoch:", 6) == 0) {
    char k[24];
    const char *c = strchr(s + 6, ':');
    size_t kl = c != NULL ? (size_t)(c - (s + 6)) : 0;
    if (c == NULL || kl == 0 || kl >= sizeof(k))
      return -1;
    memcpy(k, s + 6, kl);
    k[kl] = '\0';
    if (k[0] == '-' || parse_i64(k, epoch) < 0) {
      *epoch = -1;
      return -1;
    }
    *kind = TLC_WHEN_TARGET;
    return parse_i64(c + 1, v);
  }
  if (strncmp(s, "ns:", 3) == 0) {
    *kind = TLC_WHEN_TARGET;
    return parse_i64(s + 3, v);
  }
  *kind = TLC_WHEN_WALL;
  if (s[0] == '-')
    return parse_relative(s, now_ns, v);
  return parse_rfc3339(s, v);
}

int tlc_when_range(const char *since, const char *until, int64_t now_ns, tlc_when_range_t *r,
                   char *err, size_t errlen) {
  int ks = TLC_WHEN_NONE, ku = TLC_WHEN_NONE;
  int64_t es = -1, eu = -1;
  memset(r, 0, sizeof(*r));
  r->epoch = -1;
  if (since != NULL && tlc_when_parse_epoch(since, now_ns, &ks, &r->since, &es) < 0) {
    snprintf(err, errlen,
             "since expects ns:N (target time), epoch:K:N (target time in clock epoch K), an RFC "
             "3339 UTC time (2026-11-26T10:00:00Z) or a time relative to now (-2h), got %.80s",
             since);
    return -1;
  }
  if (until != NULL && tlc_when_parse_epoch(until, now_ns, &ku, &r->until, &eu) < 0) {
    snprintf(err, errlen,
             "until expects ns:N (target time), epoch:K:N (target time in clock epoch K), an RFC "
             "3339 UTC time (2026-11-26T10:00:00Z) or a time relative to now (-2h), got %.80s",
             until);
    return -1;
  }
  r->has_since = since != NULL;
  r->has_until = until != NULL;
  if (r->has_since && r->has_until && ks != ku) {
    snprintf(err, errlen,
             "since and until must both be target times (ns:N) or both wall-clock "
             "times");
    return -1;
  }
  r->kind = r->has_since ? ks : ku;
  r->epoch = r->has_since ? es : eu;
  if (r->has_since && r->has_until && es != eu) {
    snprintf(err, errlen,
             "since and until must be in the same clock epoch (both ns:N for the latest, or "
             "both epoch:K:N with the same K)");
    return -1;
  }
  if (r->has_since && r->has_until && r->since > r->until) {
    snprintf(err, errlen, "since is after until");
    return -1;
  }
  return 0;
}

int64_t tlc_when_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}
