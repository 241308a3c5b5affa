/* moment.h - a moment (issue 36, "the moment"): the range of stored events around a time REF,
 * as `tlcapd replay --around REF --span DUR`, `tlcap around` and AroundRequest spell it. Pure:
 * parsing only (the writers are daemon/history/moment.h). Any thread.
 *
 * A moment is the range REF - span <= t <= REF + span: target time for `ns:N` / `epoch:K:N`,
 * arrival (wall clock) for an RFC 3339 time or `-2h` (when.h).
 *
 * A violation's REF (SPEC 13, docs/budgets.md "The moment"), `v:BUDGET:N` (N >= 1, its number
 * among BUDGET's violations, as its document's "ref" spells it), names a stretch of target
 * time rather than a time: its moment is start - span <= t <= end + span in its clock epoch.
 * Which stretch it is, is the daemon's to look up (the watch's kept violations); here only its
 * spelling (tlc_moment_parse_vref) and the range of a stretch (tlc_moment_of_stretch).
 */
#ifndef TLC_FORMATS_MOMENT_H
#define TLC_FORMATS_MOMENT_H

#include "formats/when.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_MOMENT_SPAN_DEFAULT_NS 10000000ll /* 10 ms either side */
#define TLC_MOMENT_SPAN_MAX_NS     (86400ll * 1000000000ll)

enum tlc_moment_export {
  TLC_MOMENT_TEXT1 = 1,
  TLC_MOMENT_JSON,
  TLC_MOMENT_BIN11,
  TLC_MOMENT_BIN10,
  TLC_MOMENT_EVLOG
};

typedef struct tlc_moment {
  tlc_when_range_t range; /* the range read */
  int64_t ref;            /* REF on the range's clock */
  int64_t span;           /* ns either side */
} tlc_moment_t;

/* A duration: a number with a unit ns, us, ms, s, m or h ("10ms", "1.5s"; no unit: ns). 0 and
 * *ns, or -1 when it is not one (or is negative, or over TLC_MOMENT_SPAN_MAX_NS). */
int tlc_moment_parse_span(const char *s, int64_t *ns);

/* The moment of REF (when.h spellings) and span (NULL: the default) into *m. 0, or -1 with a
 * message in err. */
int tlc_moment_parse(const char *ref, const char *span, int64_t now_ns, tlc_moment_t *m, char *err,
                     size_t errlen);

/* Is ref a violation's REF? 1 with BUDGET in name[0..namelen) and *n = N; 0 when ref does not
 * start with "v:" (another spelling: tlc_moment_parse); -1 with a message in err when it does
 * but is not `v:NAME:N` (NAME: letters, digits, _ - . ; N a decimal >= 1). */
int tlc_moment_parse_vref(const char *ref, char *name, size_t namelen, uint64_t *n, char *err,
                          size_t errlen);

/* The moment of target time start..end (start <= end) in clock epoch `epoch` (>= 0) with span
 * (NULL: the default) into *m: start - span <= t <= end + span, m->ref = start. 0, or -1 with
 * a message in err (a bad span). */
int tlc_moment_of_stretch(int64_t start, int64_t end, int64_t epoch, const char *span,
                          tlc_moment_t *m, char *err, size_t errlen);

/* The export's number for a name ("text1", "json", "bin11", "bin10", "evlog"), 0 if none. */
int tlc_moment_export_of(const char *name);
const char *tlc_moment_export_name(int export_);

#endif
