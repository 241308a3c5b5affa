/* dec.h - streaming decoders for the live formats (bin10, bin11, evlog), one interface.
 *
 * The caller pushes bytes in chunks of any size (1 byte to many MiB) and receives decoded
 * events in a caller-provided array. The events produced are identical for every chunking of
 * the same input (tests/unit/test_chunking.c proves it). No allocation per record: a decoder
 * allocates only in tlc_dec_init (evlog's carry buffer) and never trusts a length or an
 * alignment it cannot check.
 *
 * Two modes:
 *  - strict (TCP, files): the first invalid record or block stops the decoder with an error
 *    naming the stream byte offset and the reason (tlc_dec_t.err_offset / err_reason); every
 *    event before it has been delivered.
 *  - resync (serial and other lossy links): invalid bytes are skipped up to the next plausible
 *    record boundary (bin1x) or block magic (evlog) and counted in bytes_skipped, resyncs and
 *    records_invalid; the first event after lost bytes carries TLC_EVF_GAP.
 *
 * Loop usage:
 *     while (len > 0) {
 *       int n = tlc_dec_push(&d, in, len, &used, evs, N);
 *       if (n < 0) -> error (strict mode): d.err_offset, d.err_reason
 *       consume evs[0..n);  in += used; len -= used;
 *     }
 *     at end of stream: while ((n = tlc_dec_finish(&d, evs, N)) > 0) consume; n < 0: see err.
 * tlc_dec_push always makes progress: it returns n > 0 or *used > 0 unless len == 0 or
 * max == 0. Event string slices (evlog) stay valid until the next call into the decoder.
 *
 * Runs on whichever single thread owns the decoder.
 */
#ifndef TLC_DEC_H
#define TLC_DEC_H

#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

/* The default time tolerance (tlc_dec_opts_t.time_tolerance_ns 0): 1 s. */
#define TLC_DEC_TOLERANCE_NS ((int64_t)1000000000)

typedef struct tlc_dec_opts {
  int resync;                /* 0 strict, 1 resync */
  int64_t time_tolerance_ns; /* bin1x: allowed backwards step (default 1 s when 0); strict: a
                                larger one may start a clock restart (TLC_EVF_RESTART) */
  unsigned confirm;          /* bin1x resync: records confirming a boundary (default 3; 1..16) */
  uint32_t max_block;        /* evlog: largest block size accepted (default 64 MiB when 0) */
  /* The bytes that go into no record or block: skipped by a resync (bytes_skipped), dropped by
   * tlc_dec_reset, cut off at the end of a stream (truncated). Called as the decoder decides,
   * in stream order, with their stream offset (buf valid during the call only), before the
   * events decoded after them are handed out; a run may come in several calls. NULL: not
   * reported. (Storage keeps them for keep_skipped without re-deriving them.) */
  void (*skipped_cb)(void *ud, uint64_t offset, const uint8_t *buf, size_t len);
  void *skipped_ud;
} tlc_dec_opts_t;

typedef struct tlc_dec_counters {
  uint64_t bytes;           /* bytes pushed */
  uint64_t records;         /* records or items delivered */
  uint64_t bytes_skipped;   /* bytes dropped by resynchronisation */
  uint64_t resyncs;         /* times the decoder lost and regained sync */
  uint64_t records_invalid; /* records/items/blocks judged invalid */
  uint64_t truncated;       /* bytes of a partial record/block at end of stream */
  uint64_t blocks;          /* evlog: blocks whose header was accepted */
  uint64_t overflow_blocks; /* evlog: blocks with an overflow count > 0 */
  uint64_t overflow_items;  /* evlog: sum of overflow counts (items the writer lost) */
} tlc_dec_counters_t;

#include "formats/bin1x.h"
#include "formats/evlog.h"

typedef struct tlc_dec {
  tlc_format_t format;
  tlc_dec_opts_t opts;
  tlc_dec_counters_t c;
  uint64_t pos;         /* stream offset of the next byte pushed */
  int err;              /* sticky error (strict mode), 0 while healthy */
  uint64_t err_offset;  /* stream offset the error refers to */
  char err_reason[160]; /* why, in words, e.g. "event type 7 > 4 in record" */
  union {
    tlc_bin1x_state_t bin;
    tlc_evlog_state_t ev;
  } u;
} tlc_dec_t;

/* Initialises `d` for `format` with `opts` (NULL: strict, defaults). Returns 0, TLC_EINVAL for
 * a bad format or option, or TLC_ENOMEM. */
int tlc_dec_init(tlc_dec_t *d, tlc_format_t format, const tlc_dec_opts_t *opts);

/* Frees what init allocated. Safe on zeroed memory. */
void tlc_dec_fini(tlc_dec_t *d);

/* Decodes from in[0..len): sets *used to the bytes taken and fills ev[0..n). Returns n >= 0,
 * or a negative error (strict mode; sticky: later calls return it again). */
int tlc_dec_push(tlc_dec_t *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                 size_t max);

/* End of stream: delivers events held back for confirmation (resync mode). Call until it
 * returns 0. If a partial record or block remains, returns TLC_ETRUNC once with err_offset at
 * its start and err_reason saying how many bytes of how many were there (counted in
 * `truncated`). The decoder is then ready for a new stream (tlc_dec_reset is implied) with its
 * counters kept. */
int tlc_dec_finish(tlc_dec_t *d, tlc_event_t *ev, size_t max);

/* The line has been idle (no byte for a short time, the caller's clock: the decoder has none).
 * In bin1x resync mode, delivers the whole records held back only for confirmation by the
 * records after them, as long as each is plausible and near the last one delivered in the
 * locked alignment (in sync), so that the last records of a burst are counted without waiting
 * for the next burst (SPEC 1). A partial record, and records of a stream not yet in sync, stay
 * held. Returns the number of events (0 for other formats and modes), never an error. */
int tlc_dec_idle(tlc_dec_t *d, tlc_event_t *ev, size_t max);

/* Forgets partial input and sync state (a reconnect); keeps counters and options; clears a
 * strict-mode error. The first event after a reset carries TLC_EVF_GAP only if bytes were lost. */
void tlc_dec_reset(tlc_dec_t *d);

/* What the decoder holds back, for a caller's deadline ("is the stream inside a record?"):
 * 0 when the stream sits on a record/block boundary with nothing held; else a non-zero count
 * (bin1x: bytes of records not handed out yet - a partial record, or records held for
 * confirmation in resync mode; evlog: inside a block, the bytes of it still to come, at least
 * 1; between blocks, the bytes held of a partial header or item). Pure read; any thread that
 * owns the decoder. */
size_t tlc_dec_pending(const tlc_dec_t *d);

/* Guesses the format of a stream from its first bytes: evlog by its block magic (either byte
 * order), bin11 or bin10 by record plausibility. Writes a one-line explanation into why
 * (e.g. "bin11: 170 of 170 records plausible"). Returns TLC_FMT_NONE if nothing fits. */
tlc_format_t tlc_dec_detect(const uint8_t *buf, size_t len, char *why, size_t whylen);

/* "bin10", "bin11", "evlog" or "none"; and back (TLC_FMT_NONE if unknown). */
const char *tlc_format_name(tlc_format_t f);
tlc_format_t tlc_format_parse(const char *name);

#endif
