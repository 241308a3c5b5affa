/* bin1x.h - winIDEA binary timeline records, versions 1.0 (bin10) and 1.1 (bin11).
 *
 * Decoding goes through dec.h (tlc_dec_*); this header holds the bin1x decoder state that
 * dec.h embeds, the module entry points dec.c dispatches to, and the encoder.
 */
#ifndef TLC_BIN1X_H
#define TLC_BIN1X_H

#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_BIN1X_RECORD      24
#define TLC_BIN1X_MAX_CONFIRM 16
/* Resync: offsets scanned after a loss of sync before a candidate that is consistent only with
 * itself (a target reboot restarting time) is accepted: 64 records' worth of bytes. */
#define TLC_BIN1X_WINDOW (64 * TLC_BIN1X_RECORD)
/* Resync: the largest forward time step from the last record delivered for a record to be
 * taken without the scan window, and between the records of a confirming run (2^31 ns, about
 * 2.1 s). A longer pause in the stream costs latency (the window), not records. */
#define TLC_BIN1X_MAX_STEP_NS ((int64_t)1 << 31)
/* Bytes the decoder holds: the scan window, a record's worth of offsets after its last one
 * (the best of nearby candidates is chosen), and a confirming run after that. */
#define TLC_BIN1X_HOLD (TLC_BIN1X_WINDOW + TLC_BIN1X_RECORD * (TLC_BIN1X_MAX_CONFIRM + 2))

struct tlc_dec;

/* Resync: the best of the candidates within a record's length of the first one noted. */
typedef struct tlc_bin1x_pick {
  uint64_t first; /* UINT64_MAX when none */
  uint64_t best;
  uint64_t var; /* the best one's score: time variation along its run, then |time| */
  uint64_t mag;
  unsigned odd; /* records of its run with bits set where writers leave zeros */
} tlc_bin1x_pick_t;

/* Decoder state (embedded in tlc_dec_t; private to bin1x.c). Offsets are stream offsets. */
typedef struct tlc_bin1x_state {
  uint8_t win[TLC_BIN1X_HOLD]; /* undecided bytes [wbase, wbase + wlen) */
  size_t wlen;
  uint64_t wbase;
  uint64_t cur;           /* in sync: offset of the next record */
  uint64_t lost_from;     /* lost: first byte not yet accounted for */
  uint64_t scan;          /* lost: next candidate offset */
  tlc_bin1x_pick_t any;   /* lost: candidates consistent only with themselves */
  tlc_bin1x_pick_t clean; /* lost: those of them without odd records */
  int64_t last;           /* time of the last record delivered (valid when have_last) */
  uint8_t lost;           /* resync mode: 1 while looking for a record boundary */
  uint8_t have_last;
  uint8_t gap;             /* bytes were lost before the next event */
  uint8_t skipped;         /* this loss of sync has skipped bytes already */
  uint8_t pending_invalid; /* a record was rejected in sync; counted once bytes are skipped */
} tlc_bin1x_state_t;

/* Module entry points for dec.c; same contracts as the tlc_dec_* functions. */
int tlc__bin1x_init(struct tlc_dec *d);
int tlc__bin1x_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                    size_t max);
int tlc__bin1x_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max);
void tlc__bin1x_reset(struct tlc_dec *d);
int tlc__bin1x_idle(struct tlc_dec *d, tlc_event_t *ev, size_t max);

/* Encodes one event as a 24-byte record of format `f` (TLC_FMT_BIN10 or TLC_FMT_BIN11) into
 * out. The type/flags word is ev->raw when it agrees with ev->type (and, for bin11, ev->core),
 * so that re-encoding decoded records is byte-identical, unknown bits included; otherwise it is
 * composed from type (and core). Pure; any thread. */
void tlc_bin1x_encode(tlc_format_t f, const tlc_event_t *ev, uint8_t out[TLC_BIN1X_RECORD]);

/* Reads n whole records of format `f` from buf[0..n*24) into ev[0..n) without judging them
 * (records a decoder accepted already, e.g. a stored segment's): the fields as tlc_dec_push
 * gives them, offsets base, base + 24, ..., no flags. Pure; any thread. */
void tlc_bin1x_read_records(tlc_format_t f, const uint8_t *buf, size_t n, uint64_t base,
                            tlc_event_t *ev);

/* How many consecutive plausible whole records start at buf[0..len) read as format `f`, for
 * format detection: type <= 4, area <= 5, time no more than 1 s before the previous record's,
 * and the word's bits a writer of that version leaves zero are zero (bin11: flags bits 12-31;
 * bin10: event bits 0-11), so that bin10 and bin11 streams tell apart. A word of 0 (Exit on
 * core 0) fits both readings: all-exit core-0 streams tie, and dec.c gives ties to bin11.
 * Returns 0 for another format. Pure; any thread. */
size_t tlc_bin1x_plausible_run(tlc_format_t f, const uint8_t *buf, size_t len);

#endif
