/* pipeline.h - one stream's way from bytes to statistics: decoder -> evlog mapping -> engine.
 *
 *     bytes -> tlc_dec_push -> decoded_cb -> [evlog: tlc_evmap_map] -> [range] -> tlc_engine_push
 *           -> mapped_cb
 *
 * The one object that runs it wherever it runs: a live target (daemon/ingest/target.c), `tlcapd
 * replay` (daemon/replay.c) and a stored segment's main export (daemon/store/export.c). It owns
 * its decoder, its evlog mapping (evlog streams) and its engine (optional: replay's second pass
 * and its native exports read the mapped events without one); it gets its collaborators when
 * it is created: the event buffers (a target registry shares one pair among all its targets)
 * and the observers called with each batch. Pure: no libuv, no I/O; not thread-safe.
 *
 * The optional time range (replay --from/--to, stored ranges) keeps mapped events whose time lies
 * in [from, to]; a gap marked with tlc_pipeline_gap_mark is carried by the next event that comes
 * out (TLC_EVF_GAP), and only when events came out before it.
 */
#ifndef TLC_PIPELINE_H
#define TLC_PIPELINE_H

#include "engine/engine.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

/* What a pipeline is made of. Copied by tlc_pipeline_init. */
typedef struct tlc_pipeline_conf {
  tlc_format_t format;
  tlc_dec_opts_t dec;       /* zeroed: the decoder's defaults */
  tlc_evmap_opts_t evmap;   /* evlog; zeroed: the mapping's defaults */
  int with_engine;          /* 0: no engine (the mapped events are the product) */
  tlc_engine_opts_t engine; /* with_engine: as tlc_engine_new takes them */
  int has_from, has_to;     /* the time range, ns (replay --from/--to) */
  int64_t from, to;
  int stop_on_map_error; /* an item the mapping cannot store (TLC_ENOMEM) ends the batch
                            with the error (replay); 0: it is left out (live: counted by
                            the mapping) */
} tlc_pipeline_conf_t;

/* Collaborators, given at creation. `raw` (batch events) receives what the decoder makes and
 * `out` (2 * batch: the evlog mapping makes up to two per item) the mapped events; both may be
 * NULL for a pipeline fed events only (tlc_pipeline_events) that neither maps nor filters.
 * Observers may be NULL: bytes_cb gets the bytes the decoder consumed, with the stream offset of
 * buf[0], before the events made of them go anywhere; decoded_cb gets each batch as decoded with
 * the bytes it was decoded from (chunk[0..clen) = stream bytes from offset coff; a record may have
 * begun in an earlier chunk; chunk is NULL for what the decoder hands out at the end or when idle);
 * mapped_cb the events given to the engine (after mapping and range; not called for none). */
typedef struct tlc_pipeline_io {
  tlc_event_t *raw, *out;
  size_t batch;
  void (*bytes_cb)(void *ud, const uint8_t *buf, size_t len, uint64_t offset);
  void (*decoded_cb)(void *ud, const tlc_event_t *ev, size_t n, const uint8_t *chunk, size_t clen,
                     uint64_t coff);
  void (*mapped_cb)(void *ud, const tlc_event_t *ev, size_t n);
  void *ud;
} tlc_pipeline_io_t;

typedef struct tlc_pipeline {
  tlc_format_t format;
  tlc_dec_t dec;             /* the current stream's decoder */
  struct tlc_evmap *evmap;   /* evlog only, else NULL */
  struct tlc_engine *engine; /* NULL without one (or once taken) */
  tlc_dec_counters_t total;  /* counters of the decoders tlc_pipeline_restart ended */
  tlc_pipeline_conf_t conf;
  tlc_pipeline_io_t io;
  uint8_t dec_live;             /* dec is initialised */
  uint8_t pending_gap, any_out; /* range: a gap waits for the next event out */
} tlc_pipeline_t;

/* Makes the decoder, the evlog mapping (evlog) and the engine (with_engine). Returns 0,
 * TLC_EINVAL (an evlog stream or a range without buffers), TLC_ENOMEM or the engine's error;
 * on error nothing is left to free. */
int tlc_pipeline_init(tlc_pipeline_t *p, const tlc_pipeline_conf_t *conf,
                      const tlc_pipeline_io_t *io);
/* Frees everything it owns. Safe on zeroed memory. */
void tlc_pipeline_fini(tlc_pipeline_t *p);

/* Decodes one batch from buf[0..len) (*used: bytes consumed) and runs it through: bytes_cb,
 * decoded_cb, mapping, range, engine, mapped_cb. Returns the number of events the decoder made
 * (0 when it needs more bytes) or its negative error (strict mode: the events before the error
 * came out first, and p->dec.err says it at the next call). *nout gets the number of events that
 * came out of the mapping and range (*out points at them, valid until the next call), or the
 * mapping's negative error (stop_on_map_error). out and nout may be NULL. */
int tlc_pipeline_push(tlc_pipeline_t *p, const uint8_t *buf, size_t len, size_t *used,
                      const tlc_event_t **out, int *nout);
/* The end of the stream (tlc_dec_finish): one batch of what the decoder held, run through.
 * Returns as tlc_pipeline_push (0: nothing left; TLC_ETRUNC: a partial tail). */
int tlc_pipeline_finish(tlc_pipeline_t *p, const tlc_event_t **out, int *nout);
/* The line has been idle (tlc_dec_idle): one batch of what the decoder held for confirmation,
 * run through. Returns as tlc_pipeline_push. */
int tlc_pipeline_idle(tlc_pipeline_t *p, const tlc_event_t **out, int *nout);
/* Runs decoded events ev[0..n) through mapping, range, engine and mapped_cb (no decoder, no
 * decoded_cb). Returns the number that came out (*out points at them) or the mapping's error;
 * TLC_ERANGE for more than `batch` events when it maps or filters. */
int tlc_pipeline_events(tlc_pipeline_t *p, const tlc_event_t *ev, size_t n,
                        const tlc_event_t **out);

/* A gap now (a disconnect): the engine and the evlog mapping forget what was open. */
void tlc_pipeline_gap(tlc_pipeline_t *p);
/* A gap between two inputs of a replay: the mapping forgets now, the engine sees it on the next
 * event that comes out (TLC_EVF_GAP), if any came out before. */
void tlc_pipeline_gap_mark(tlc_pipeline_t *p);
/* Readies the decoder for the next stream of the same source (tlc_dec_reset: counters and
 * offsets run on). */
void tlc_pipeline_reset(tlc_pipeline_t *p);
/* A fresh decoder for the next input (offsets from 0; its predecessor's counters are added to
 * p->total). Returns 0 or a negative error (the pipeline then has no decoder until the next
 * successful call; tlc_pipeline_fini stays safe). */
int tlc_pipeline_restart(tlc_pipeline_t *p);
/* Starts over: a fresh decoder and evlog mapping (handles come out as the first time), totals
 * and the range's state cleared; the engine (if any) is kept. Returns 0 or a negative error. */
int tlc_pipeline_rewind(tlc_pipeline_t *p);
/* Hands the engine to the caller (who frees it); the pipeline goes on without one. */
struct tlc_engine *tlc_pipeline_take_engine(tlc_pipeline_t *p);
/* Decoder counters of every input so far: p->total plus the current decoder's. */
void tlc_pipeline_dec_counters(const tlc_pipeline_t *p, tlc_dec_counters_t *out);

#endif
