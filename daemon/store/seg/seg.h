/* seg.h - what the segment files are made of that the store's API also names: the rotation
 * reasons a manifest records, and the main-export hook a seal calls. Part of the leaf library
 * store/seg/ (segment files, manifests, the reader: no threads, no event loop, no tlc_store_t);
 * store/store.h includes it.
 */
#ifndef TLC_SEG_H
#define TLC_SEG_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/rtos.h"
#include "formats/timeline.h"
#include "formats/tlc_event.h"

#include <stdint.h>

/* Rotation reasons (tlc_store_rotate, manifests, events). */
enum tlc_store_reason {
  TLC_ROT_SIZE = 1,
  TLC_ROT_AGE = 2,
  TLC_ROT_RECONNECT = 3,
  TLC_ROT_SIGHUP = 4,
  TLC_ROT_COMMAND = 5,
  TLC_ROT_SHUTDOWN = 6,
  TLC_ROT_IO_ERROR = 7,     /* forced by a failed write or fsync (R5) */
  TLC_ROT_RECOVERED = 8,    /* sealed by crash recovery */
  TLC_ROT_IDLE = 9,         /* the target stayed disconnected for idle_seal (docs/continuity.md) */
  TLC_ROT_CLOCK_RESET = 10, /* the target's clock restarted in the stream (SPEC 2) */
  TLC_ROT_RESET = 11        /* `tlcap reset`: the statistics start afresh (SPEC 10) */
};

/* What the main-export hook gets for a bin1x segment (sealer thread, or the recovering one). */
typedef struct tlc_store_export {
  const char *target;       /* target name */
  tlc_format_t format;      /* TLC_FMT_BIN10 or TLC_FMT_BIN11 */
  uint64_t seq;             /* segment sequence */
  const char *data_path;    /* the segment's data file (complete; may still be named .part) */
  tlc_timeline_t *timeline; /* the segment's events, re-read from data_path (rewindable) */
  tlc_out_t *out;           /* where to write the export (flushes into a temporary file) */
  int recovered;            /* 1 when sealed by crash recovery */
  /* The target's settings when the segment was closed (tlc_store_target_set_mapping and
   * tlc_store_target_configure). For a segment sealed by crash recovery (or found without its
   * export at start): those of the first configuration of a target of that name after the
   * start, or none when no such target was configured before tlc_store_close. */
  const tlc_mapping_t *mapping; /* names (NULL: none); read-only, valid during the call */
  uint8_t has_context_area;     /* RTOS task-state area: contexts are its values */
  uint32_t context_area;
  int xml;               /* 1: write winIDEA XML (the .BIN is its TimelineBinary); 0: Text1 */
  const char *data_name; /* the data file's sealed name, e.g. "<base>.xml.BIN" (no directory) */
  tlc_ctxpack_t pack;    /* packed context_area values (formats/rtos.h; masks 0: not packed) */
} tlc_store_export_t;

/* Writes the main export of one segment into x->out, e.g. by running a tlc_engine over
 * x->timeline and calling tlc_text1_write. Runs on the exporter or the sealer thread (or the
 * recovering thread during tlc_store_recover, the writer at shutdown): must only touch its own
 * state. Returns 0 or a negative error (the
 * export is then left out and the error logged; the segment is sealed regardless; a missing
 * export is written again when space returns after ENOSPC, or at the next start). */
typedef int (*tlc_store_export_fn)(void *ud, const tlc_store_export_t *x);

/* "size", "age", "reconnect", "sighup", "command", "shutdown", "io_error", "recovered",
 * "idle". */
const char *tlc_store_reason_name(int reason);

#endif
