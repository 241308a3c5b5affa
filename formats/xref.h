/* xref.h - an extreme's REF (SPEC 13, docs/budgets.md "The moment of an extreme"): the moment
 * around the sample that made an area's MIN or MAX, as `tlcap around TARGET REF` and `tlcapd
 * replay --around REF` spell it:
 *
 *   max:KIND:AREA[@CONTEXT]     min:KIND:AREA[@CONTEXT]
 *
 * KIND net, gross, call, period or outside; AREA a mapped name, or a handle (0x and hex, the
 * 8 hex digits `tlcap stats` shows, or decimal); CONTEXT a context's name as the exports show
 * it (core0, task1A, thread3, a task's CONTEXTS name), its id (the core, task value or thread
 * id: decimal or 0x hex), or for a state area state=VALUE or the value's mapped name. The REF
 * names the stretch of target time from the sample's first to its closing event in its clock
 * epoch (tlc_at_t), read as a violation's is (tlc_moment_of_stretch).
 *
 * Pure: parsing and lookup in a statistics table (the daemon's live one, or the replay's over
 * the stored segments), so that both find the same sample. Any thread.
 */
#ifndef TLC_FORMATS_XREF_H
#define TLC_FORMATS_XREF_H

#include "formats/mapping.h"
#include "formats/stats.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_XREF_AREA_MAX 255
#define TLC_XREF_CTX_MAX  127

typedef struct tlc_xref {
  uint8_t max;         /* 1 max:, 0 min: */
  uint8_t kind;        /* enum tlc_kind */
  uint8_t has_context; /* @CONTEXT given */
  char area[TLC_XREF_AREA_MAX + 1];
  char context[TLC_XREF_CTX_MAX + 1];
} tlc_xref_t;

/* Is ref an extreme's REF? 1 with *x filled; 0 when it starts neither with "max:" nor "min:"
 * (another spelling); -1 with a message in err when it does but is not
 * `max|min:KIND:AREA[@CONTEXT]` (the last '@' starts CONTEXT). */
int tlc_xref_parse(const char *ref, tlc_xref_t *x, char *err, size_t errlen);

/* The handle x->area names: a mapped name in m (may be NULL), else a number. 0 with *handle;
 * -ENOENT (no area of that name: err says so) or TLC_EINVAL (a name several areas carry: err
 * lists their handles). */
int tlc_xref_handle(const tlc_xref_t *x, const tlc_mapping_t *m, uint32_t *handle, char *err,
                    size_t errlen);

/* The extreme x names among the rows of area `handle` in table t (sorted, as a snapshot is;
 * other areas' rows and Neutral rows are ignored), names from m (may be NULL): 0 with *at (its
 * time, known) and *value; else a message in err naming the REF and:
 *   -ENOENT     the area has no statistics, or no context matches CONTEXT (err lists them);
 *   TLC_EINVAL  the area has samples in several contexts and none is named (err lists them),
 *               or KIND does not apply to the area's type;
 *   TLC_ERANGE  no sample of KIND yet, or the extreme's time is not known (statistics
 *               restored from an older checkpoint). */
int tlc_xref_find(const tlc_xref_t *x, const tlc_table_t *t, const tlc_mapping_t *m,
                  uint32_t handle, tlc_at_t *at, int64_t *value, char *err, size_t errlen);

/* "max:net:AREA@CONTEXT" as x spells it (without @ when no context), into buf; returns buf. */
const char *tlc_xref_text(const tlc_xref_t *x, char *buf, size_t len);

#endif
