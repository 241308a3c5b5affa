/* text1.h - winIDEA Text1 export writer.
 *
 * Writes the sections INFO, CONTEXTS, HANDLE(Functions|Data|AUX), STATISTICS(...) (once per
 * context, and once for Neutral when there is more than one context) and TIMELINE, each entry
 * line formatted by a configurable format of %MACRO% fields (the seed's macro set plus a few
 * documented extensions, see docs/exports.md). Number formats follow SPEC section 4.
 *
 * Pure: writes into a tlc_out_t; reads a tlc_table_t, an optional mapping and an optional
 * timeline. Not thread-safe per opts object once compiled formats are being changed.
 */
#ifndef TLC_TEXT1_H
#define TLC_TEXT1_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/timeline.h"

#include <stddef.h>

/* The configurable entries, as the `--text1-format ENTRY=FORMAT` option names them. */
enum tlc_text1_entry {
  TLC_T1_INFO = 0,   /* InfoEntry */
  TLC_T1_CONTEXT,    /* ContextEntry */
  TLC_T1_MAPPING,    /* MappingEntry */
  TLC_T1_STATISTICS, /* StatisticsEntry */
  TLC_T1_TIMELINE,   /* TimelineEntry */
  TLC_T1_NENTRIES
};

/* Sections (bit mask). */
#define TLC_T1_SEC_INFO       0x01u
#define TLC_T1_SEC_CONTEXTS   0x02u
#define TLC_T1_SEC_HANDLE     0x04u
#define TLC_T1_SEC_STATISTICS 0x08u
#define TLC_T1_SEC_TIMELINE   0x10u
#define TLC_T1_SEC_ALL        0x1Fu

#define TLC_T1_MAX_FORMAT 1024
#define TLC_T1_MAX_TOKENS 128

typedef struct tlc_text1_tok {
  uint16_t macro; /* 0 = literal, else a macro id */
  uint16_t len;   /* literal length */
  uint16_t off;   /* literal offset in fmt */
} tlc_text1_tok_t;

typedef struct tlc_text1_fmt {
  char text[TLC_T1_MAX_FORMAT];
  tlc_text1_tok_t tok[TLC_T1_MAX_TOKENS];
  unsigned ntok;
} tlc_text1_fmt_t;

typedef struct tlc_text1_opts {
  tlc_text1_fmt_t fmt[TLC_T1_NENTRIES];
  unsigned sections; /* TLC_T1_SEC_* mask */
} tlc_text1_opts_t;

/* Fills opts with the default formats (the seed's examples:
 * InfoEntry "%TOTAL_TIME%", ContextEntry "%NAME%,%HANDLE%", MappingEntry
 * "%HANDLE%,%NAME%,%VALUE%", StatisticsEntry "%HANDLE%,%VALUE%,%COUNT%,%T.NET%",
 * TimelineEntry "%HANDLE%,%EVENT%,%VALUE%,%TIME%") and every section on. */
void tlc_text1_opts_default(tlc_text1_opts_t *opts);

/* Applies one "ENTRY=FORMAT" option. Returns 0, or TLC_EINVAL with a message in err naming the
 * unknown entry or macro, or a macro that does not apply to that entry. */
int tlc_text1_set_format(tlc_text1_opts_t *opts, const char *spec, char *err, size_t errlen);

/* Writes the export. `t` must be sorted (tlc_table_sort). `m` (names) and `tl` (events for the
 * TIMELINE section) may be NULL: the HANDLE section then lists observed areas without names,
 * and TIMELINE is omitted. Returns 0 or the first error (from the timeline or the output). */
int tlc_text1_write(tlc_out_t *o, const tlc_text1_opts_t *opts, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl);

/* The context a timeline event runs in, as %CONTEXT% names it (shared by the XML writer):
 * thread<HEX> for evlog, the core (core<N>, core?), or with context_area the task last written
 * (W or E) to that handle on the event's core (its CONTEXTS name, else task<HEX>). Feed every
 * event, in order, to tlc_evctx_update after naming it. Zero-initialise before the first. */
typedef struct tlc_evctx {
  uint8_t has_task[256];
  uint64_t task[256];
} tlc_evctx_t;

void tlc_evctx_update(tlc_evctx_t *x, const tlc_table_t *t, const tlc_event_t *ev);
const char *tlc_evctx_name(const tlc_evctx_t *x, const tlc_table_t *t, const tlc_mapping_t *m,
                           const tlc_event_t *ev, char *buf, size_t len);

/* Writes one field of a Text1 entry, quoting it (double quotes, inner quotes doubled) exactly
 * when tlc_mapping_field_needs_quotes() says the mapping reader could not read it back raw;
 * anything else is written raw, as winIDEA writes names like "TestStatic1.c"#StaticFunc. */
void tlc_text1_field(tlc_out_t *o, const char *s, char sep);

#endif
