/* moment.c - a moment's range from its spellings (moment.h). */
#include "formats/moment.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tlc_moment_parse_span(const char *s, int64_t *ns) {
  static const struct {
    const char *u;
    double mul;
  } units[] = { { "ns", 1 },   { "us", 1e3 },   { "ms", 1e6 }, { "s", 1e9 },
                { "m", 60e9 }, { "h", 3600e9 }, { "", 1 } };
  char *end;
  double v;
  if (s == NULL || *s == '\0' || *s == '-' || *s == '+' || *s == ' ')
    return -1;
  errno = 0;
  v = strtod(s, &end);
  if (end == s || errno != 0 || !isfinite(v) || v < 0)
    return -1;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
    if (strcmp(end, units[i].u) == 0) {
      double x = v * units[i].mul;
      if (x > (double)TLC_MOMENT_SPAN_MAX_NS)
        return -1;
      *ns = (int64_t)llround(x);
      return 0;
    }
  return -1;
}

int tlc_moment_parse(const char *ref, const char *span, int64_t now_ns, tlc_moment_t *m, char *err,
                     size_t errlen) {
  int kind;
  int64_t v, epoch;
  memset(m, 0, sizeof(*m));
  m->span = TLC_MOMENT_SPAN_DEFAULT_NS;
  if (ref == NULL || tlc_when_parse_epoch(ref, now_ns, &kind, &v, &epoch) < 0) {
    snprintf(err, errlen,
             "around: '%s' is not a time (ns:N, epoch:K:N, RFC 3339 UTC such as "
             "2026-11-26T10:00:00Z, or -2h)",
             ref != NULL ? ref : "");
    return -1;
  }
  if (span != NULL && tlc_moment_parse_span(span, &m->span) < 0) {
    snprintf(err, errlen, "span: '%s' is not a duration (such as 10ms, 500us, 2s; at most 24h)",
             span);
    return -1;
  }
  m->ref = v;
  m->range.kind = kind;
  m->range.epoch = kind == TLC_WHEN_TARGET ? epoch : -1;
  m->range.has_since = m->range.has_until = 1;
  m->range.since = v > INT64_MIN + m->span ? v - m->span : INT64_MIN;
  m->range.until = v < INT64_MAX - m->span - 1 ? v + m->span + 1 : INT64_MAX; /* t <= ref + span */
  return 0;
}

int tlc_moment_parse_vref(const char *ref, char *name, size_t namelen, uint64_t *n, char *err,
                          size_t errlen) {
  const char *colon, *p;
  size_t len;
  uint64_t v = 0;
  if (ref == NULL || strncmp(ref, "v:", 2) != 0)
    return 0;
  colon = strrchr(ref + 2, ':');
  len = colon != NULL ? (size_t)(colon - (ref + 2)) : 0;
  if (colon == NULL || len == 0 || len >= namelen ||
      strspn(ref + 2, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != len ||
      colon[1] == '\0')
    goto bad;
  for (p = colon + 1; *p != '\0'; p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (*p < '0' || *p > '9' || v > UINT64_MAX / 10 ||
        (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
      goto bad;
    v = v * 10 + d;
  }
  if (v == 0)
    goto bad;
  memcpy(name, ref + 2, len);
  name[len] = '\0';
  *n = v;
  return 1;
bad:
  snprintf(err, errlen,
           "around: '%.200s' is not a violation's REF (v:BUDGET:N, N >= 1 its number among the "
           "budget's violations, as `tlcap violations` shows it)",
           ref);
  return -1;
}

int tlc_moment_of_stretch(int64_t start, int64_t end, int64_t epoch, const char *span,
                          tlc_moment_t *m, char *err, size_t errlen) {
  memset(m, 0, sizeof(*m));
  m->span = TLC_MOMENT_SPAN_DEFAULT_NS;
  if (span != NULL && tlc_moment_parse_span(span, &m->span) < 0) {
    snprintf(err, errlen, "span: '%s' is not a duration (such as 10ms, 500us, 2s; at most 24h)",
             span);
    return -1;
  }
  if (end < start)
    end = start;
  m->ref = start;
  m->range.kind = TLC_WHEN_TARGET;
  m->range.epoch = epoch;
  m->range.has_since = m->range.has_until = 1;
  m->range.since = start > INT64_MIN + m->span ? start - m->span : INT64_MIN;
  m->range.until = end < INT64_MAX - m->span - 1 ? end + m->span + 1 : INT64_MAX;
  return 0;
}

static const char *const export_names[] = { "", "text1", "json", "bin11", "bin10", "evlog" };

int tlc_moment_export_of(const char *name) {
  for (int i = 1; i < (int)(sizeof(export_names) / sizeof(export_names[0])); i++)
    if (name != NULL && strcmp(name, export_names[i]) == 0)
      return i;
  return 0;
}

const char *tlc_moment_export_name(int export_) {
  return export_ > 0 && export_ <= TLC_MOMENT_EVLOG ? export_names[export_] : "?";
}
