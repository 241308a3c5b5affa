/* timeline.h - a re-readable source of events in stream order, for exporters.
 *
 * Exporters that write a timeline (Text1 TIMELINE, XML timeline, native re-encoding, the .BIN
 * sidecar) pull events from a tlc_timeline_t instead of holding them all in memory: the
 * replay tool implements it by decoding the input files again, the daemon by reading a
 * segment. `rewind` lets an exporter make more than one pass.
 *
 * Events are mapped events (bin1x records as decoded; evlog items after the evlog mapping of
 * evmap.h, with their tlc_evlog_ext_t kept), valid until the next call.
 */
#ifndef TLC_TIMELINE_H
#define TLC_TIMELINE_H

#include "formats/tlc_event.h"

typedef struct tlc_timeline {
  /* Sets *evs to the next batch and returns its length; 0 at the end; negative on error. */
  int (*next)(void *ud, const tlc_event_t **evs);
  /* Starts again from the first event. Returns 0 or a negative error. */
  int (*rewind)(void *ud);
  void *ud;
} tlc_timeline_t;

#endif
