/* moment.h - the stored events around a moment (issue 36, "the moment"): `tlcapd replay
 * --state-dir DIR --target NAME --around REF [--span DUR]` and `tlcap around TARGET REF`.
 *
 * A moment is a history range (history.h) centred on REF: the events whose time t has
 * REF - span <= t <= REF + span, target time for `ns:N` / `epoch:K:N`, arrival (wall clock, to
 * within a second: the arrival index) for an RFC 3339 time or `-2h`. Every event of the range
 * is written, whatever its core or context, so the contexts that ran beside the one of
 * interest are there. Written as Text1 (the statistics of the moment, then its TIMELINE), as a
 * JSON document of its events (and their statistics), or natively (bin11, bin10, evlog: a
 * capture `tlcapd replay` reads again). Pure writers over a timeline and a table; any thread.
 */
#ifndef TLC_HIST_MOMENT_H
#define TLC_HIST_MOMENT_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/timeline.h"
#include "formats/moment.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

/* The JSON document of the moment: target, the range, every event (time, core, context,
 * handle, area name, event, value of a write) read from tl, and the statistics `t` of the
 * range as member "stats". `m` names (may be NULL). 0 or the output's / timeline's error. */
int tlc_moment_json(tlc_out_t *o, const tlc_moment_t *mo, const char *target, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl);

/* Writes the moment in `export_` (tlc_moment_export): Text1 (default formats, with TIMELINE),
 * JSON (tlc_moment_json), or the events re-encoded natively (`in` is the capture's format:
 * evlog needs evlog input, TLC_EFORMAT otherwise). 0 or a negative error. */
int tlc_moment_write(tlc_out_t *o, int export_, tlc_format_t in, const tlc_moment_t *mo,
                     const char *target, const tlc_table_t *t, const tlc_mapping_t *m,
                     tlc_timeline_t *tl);

#endif
