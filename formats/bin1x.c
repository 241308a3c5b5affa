/* bin1x.c - winIDEA binary timeline records, versions 1.0 (bin10) and 1.1 (bin11).
 *
 * Purpose: a streaming decoder (behind dec.h), an encoder, and the plausibility test used by
 * format detection. Every record is 24 bytes, all fields little-endian:
 *
 *   offset  0        4        8                16               24
 *           +--------+--------+----------------+----------------+
 *   bin11   | handle | flags  |      data      |    time_ns     |
 *           +--------+--------+----------------+----------------+
 *   flags:  bits 31..12 unused | 11..4 core index (0xFF unknown) | 3..0 event type
 *   bin10:  same, with an `event` word instead of `flags`:
 *           bits 31..28 unused | 27..24 event type | 23..0 unused; core always unknown
 *   handle: bits 31..28 area type (0..5), bits 27..0 the area's index
 *   type:   0 Exit, 1 Suspend, 2 Resume, 3 Entry, 4 Write;  time_ns: signed (int64)
 *
 * Fields are assembled from bytes, so the code is correct on any host byte order; compilers turn
 * the assembly into single loads on little-endian hosts.
 *
 * Strict mode checks type <= 4 and area <= 5 and stops at the first record that fails, after
 * delivering everything before it. Time going backwards is not an error (targets reboot): a
 * record more than tol below the one before it whose `confirm` successors (all valid, all more
 * than tol below that one, each within [-tol, +STEP] of the one before, as a resync restart
 * run) follow it is a clock restart of a target whose connection stayed open, and carries
 * TLC_EVF_RESTART; it is held until those successors are there (or the stream ends: at least
 * one then). The hot loop pays one compare per record for this (strict_restart is off it).
 *
 * Resync mode. Records are judged against L, the time of the last record delivered
 * (tol = opts.time_tolerance_ns, STEP = TLC_BIN1X_MAX_STEP_NS, 2^31 ns):
 *   plausible(R)  type <= 4 and area <= 5
 *   near(R)       L - tol <= t(R) <= L + STEP
 *   run(q)        the records at q, q+24, ... q+24*confirm are plausible and each time is
 *                 within [-tol, +STEP] of the one before (at the end of the stream, a shorter
 *                 run of at least two records)
 *   odd(R)        bits set where writers leave zeros: bin11 flags bits 12-31, bin10 event bits
 *                 other than 24-27, or the upper half of the (32-bit) data field
 *   In sync, the record R at p is delivered if plausible(R), near(R), and its successor S does
 *     not contradict it (S plausible and t(S) >= L - tol, but t(S) < t(R) - tol: then R alone
 *     is off, a corrupted time). Otherwise sync is lost at p and R counts in records_invalid
 *     (unless it turns out to start a reboot or a long pause, see below).
 *   Lost (also at the start of a stream, where there is no L): every byte offset q from the
 *     loss point on is a candidate if run(q) holds. One that is near(q) with no odd record in
 *     its run is taken at once. Otherwise candidates are collected while the scan covers
 *     TLC_BIN1X_WINDOW bytes (64 records) and the first clean one (no odd records) is taken,
 *     else the first of any; each time the best within 24 bytes of that first one, by fewest
 *     odd records, then least time variation along the run, then smallest |time|, because a
 *     misaligned read of real records that happens to look plausible is mostly one byte early
 *     (monotone times, but 256 times wider) or takes handles and flags for times. With no L the
 *     first complete clean pick is taken at once. This is how a pause longer than STEP is
 *     accepted: the candidate is usually the loss point itself, so nothing is lost, only
 *     delayed by the window. A target reboot (its clock restarts) is taken at once: a clean
 *     run at the loss point itself whose every record (confirm + 1 of them, the whole run)
 *     lies more than tol below L carries TLC_EVF_RESTART (the engine then starts a clock
 *     epoch when the step is also past its clock_reset_ns); a single wild time cannot do
 *     that, since the records after it are near L. With no candidate at all
 *     the window slides on. Bytes before the record taken count in bytes_skipped; when there
 *     are any, that record carries TLC_EVF_GAP and resyncs is counted.
 * A record must agree with its successor and stay near the history, so a corrupted record with
 * a wild time is dropped alone and cannot poison the ones after it, and misaligned reads after
 * lost bytes (whose "times" are mostly far from L) rarely pass. tests/unit/test_bin1x.c
 * damages long streams at random (flips, drops, inserts): at most confirm+1 untouched records
 * are lost per damage site (3 seen in 9000 streams).
 *
 * Invariants: decisions depend only on a bounded look-ahead (at most TLC_BIN1X_HOLD bytes from
 * the first byte not yet accounted for) and are made only once those bytes are present or the
 * stream has ended, so every chunking gives the same events and counters. Every byte pushed
 * ends up as exactly one of: part of a delivered record, skipped, truncated (or dropped by
 * tlc_dec_reset, counted as skipped). No allocation at all; input is never read past its end.
 *
 * Cost: in sync, one pass over each record (plus its successor in resync mode). Decoding runs
 * straight from the caller's buffer; only a record split across pushes (or the look-ahead of
 * resync mode, at most TLC_BIN1X_HOLD bytes) is copied into the state's window. When lost,
 * each offset of the window is examined once, at most 2 * (confirm+1) records each; the worst
 * case (input that keeps triggering the window rule right after each pick) is bounded by
 * about WINDOW/24 * 2 * (confirm+1) record checks per input byte.
 *
 * Idle line (tlc_dec_idle): in sync, the records held only for their successor are delivered
 * when plausible and near L, as at the end of a stream; the caller calls it after a short
 * silence (serial: resync_idle, 50 ms), so a burst's last record does not wait for the next
 * burst. A record a late successor would have contradicted is then already delivered: the
 * price of not waiting forever.
 *
 * Does not: reject bits outside the type and core fields (they are kept in `raw`; resync only
 * prefers candidates without them), interpret handles, or reorder events. In resync mode a
 * stream needs two records to be synchronised (a lone record is skipped), and the first
 * records are held back until confirmed. Streams whose times stay near zero and whose fields
 * are mostly zero are hard to resynchronise reliably: misaligned reads look plausible too.
 */
#include "formats/dec.h"

#include "base/err.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Invariants on which memory safety rests are checked in debug and fuzzing builds (the window
 * lies inside tlc_dec_t, where AddressSanitizer cannot see an overrun). */
#if !defined(NDEBUG) || defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
#define INVARIANT(x)                                                                               \
  do {                                                                                             \
    if (!(x))                                                                                      \
      abort();                                                                                     \
  } while (0)
#else
#define INVARIANT(x) ((void)0)
#endif

#define REC        TLC_BIN1X_RECORD
#define NONE       UINT64_MAX
#define DETECT_TOL ((int64_t)1000000000)

enum { NEED = 0, STOP = 1, DONE = 2, FAIL = 3 };

/* The bytes a decision may look at: b[0..] holds stream offsets [off, end). */
typedef struct view {
  const uint8_t *b;
  uint64_t off;
  uint64_t end;
  int final; /* no byte will follow `end` */
} view_t;

static inline uint32_t ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ld64(const uint8_t *p) {
  return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static inline void st32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline void st64(uint8_t *p, uint64_t v) {
  st32(p, (uint32_t)v);
  st32(p + 4, (uint32_t)(v >> 32));
}

static inline int64_t rec_time(const uint8_t *r) {
  return (int64_t)ld64(r + 16);
}

/* Bit position of the type field in the second word. */
static inline unsigned type_shift(tlc_format_t f) {
  return f == TLC_FMT_BIN10 ? 24 : 0;
}

static inline int plausible(const uint8_t *r, unsigned sh) {
  return ((ld32(r + 4) >> sh) & 0xF) <= TLC_EV_WRITE && (r[3] >> 4) <= TLC_AREA_AUXSTATE;
}

/* t >= ref - tol, without overflow. */
static inline int not_before(int64_t t, int64_t ref, int64_t tol) {
  return t >= ref || (uint64_t)ref - (uint64_t)t <= (uint64_t)tol;
}

/* t <= ref + step, without overflow. */
static inline int within_step(int64_t t, int64_t ref, int64_t step) {
  return t <= ref || (uint64_t)t - (uint64_t)ref <= (uint64_t)step;
}

static inline void decode(const uint8_t *r, uint64_t off, unsigned sh, uint16_t flags,
                          tlc_event_t *e) {
  uint32_t w = ld32(r + 4);
  e->time_ns = (int64_t)ld64(r + 16);
  e->data = ld64(r + 8);
  e->thread = 0;
  e->offset = off;
  e->handle = ld32(r);
  e->raw = w;
  e->type = (uint8_t)((w >> sh) & 0xF);
  e->core = sh ? TLC_CORE_UNKNOWN : (uint8_t)(w >> 4);
  e->flags = flags;
  e->reserved_ = 0;
  e->evlog = NULL;
}

/* ---- strict mode ---------------------------------------------------------------------- */

/* The loop is inlined once per format so that the type shift and the core rule are
 * constants; the cold error path is out of line. */
static int strict_fail(tlc_dec_t *d, uint64_t p, uint32_t h, unsigned type) {
  d->err = TLC_EFRAME;
  d->err_offset = p;
  d->c.records_invalid++;
  if (type > TLC_EV_WRITE)
    snprintf(d->err_reason, sizeof(d->err_reason),
             "%s record at byte %llu: event type %u (valid 0..4)", tlc_format_name(d->format),
             (unsigned long long)p, type);
  else
    snprintf(d->err_reason, sizeof(d->err_reason),
             "%s record at byte %llu: handle 0x%08X has area type %u (valid 0..5)",
             tlc_format_name(d->format), (unsigned long long)p, (unsigned)h, (unsigned)(h >> 28));
  return FAIL;
}

/* On little-endian hosts the strict loop stores the record's first 8 bytes as handle+raw and
 * type..reserved_ as one word; the field order of tlc_event_t that this relies on is checked
 * here. Other hosts store field by field. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) &&                                 \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FAST_LE 1
_Static_assert(offsetof(tlc_event_t, raw) == offsetof(tlc_event_t, handle) + 4, "layout");
_Static_assert(offsetof(tlc_event_t, core) == offsetof(tlc_event_t, type) + 1, "layout");
_Static_assert(offsetof(tlc_event_t, flags) == offsetof(tlc_event_t, type) + 2, "layout");
_Static_assert(offsetof(tlc_event_t, reserved_) == offsetof(tlc_event_t, type) + 4, "layout");
_Static_assert(sizeof(((tlc_event_t *)0)->reserved_) == 4, "layout");
#else
#define FAST_LE 0
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE       inline __attribute__((always_inline))
#define TLC_UNLIKELY_DEC(x) __builtin_expect(!!(x), 0)
#define NOINLINE            __attribute__((noinline))
#else
#define ALWAYS_INLINE       inline
#define TLC_UNLIKELY_DEC(x) (x)
#define NOINLINE
#endif

static int strict_restart(const tlc_dec_t *d, const view_t *v, uint64_t p, unsigned sh,
                          int64_t prev);

static ALWAYS_INLINE int strict_loop(tlc_dec_t *d, const view_t *v, tlc_event_t *ev, size_t max,
                                     size_t *n, const unsigned sh, const int64_t tol_fixed) {
  tlc_bin1x_state_t *st = &d->u.bin;
  uint64_t p = st->cur;
  const uint8_t *r = v->b + (p - v->off);
  size_t k = *n, k0 = *n, lim = max;
  uint64_t whole = (v->end - p) / REC;
  int rc = v->final ? DONE : NEED;
  uint16_t fl = st->gap ? TLC_EVF_GAP : 0; /* tlc_dec_reset dropped bytes before this event */
  /* prev: the previous record's time (none: the first record's own). A time t more than tol
   * below it is a step back: prev - t > tol, computed modulo 2^64 (one subtraction and one
   * compare with a constant, tol_fixed, in the default case: a step of 2^63 or more between
   * absurd times is missed, then only the engine's threshold applies, as without look-ahead;
   * one the other way round is a false candidate that strict_restart turns down). */
  const int64_t tol = tol_fixed ? tol_fixed : d->opts.time_tolerance_ns;
  uint64_t prev = (uint64_t)(st->have_last ? st->last : whole > 0 ? rec_time(r) : 0);

  if (whole < lim - k)
    lim = k + (size_t)whole;
  else if (whole > lim - k)
    rc = STOP;
  if (k < lim)
    st->gap = 0;
  for (; k < lim; k++, r += REC, p += REC) {
    uint64_t hw = ld64(r);
    uint32_t h = (uint32_t)hw, w = (uint32_t)(hw >> 32);
    unsigned type = (w >> sh) & 0xF;
    tlc_event_t *e = &ev[k];
    if ((type > TLC_EV_WRITE) | (h >= 0x60000000u)) { /* area (h >> 28) > 5 */
      if (k == *n)                                    /* the reset's gap is still to be reported */
        st->gap = fl != 0;
      rc = strict_fail(d, p, h, type);
      p += REC;
      break;
    }
    uint64_t t = ld64(r + 16);
    e->time_ns = (int64_t)t;
    e->data = ld64(r + 8);
    e->thread = 0;
    e->offset = p;
#if FAST_LE
    { /* one store for handle+raw and one for type, core, flags, reserved_ (see the asserts) */
      uint64_t tail =
          type | (uint64_t)(sh ? TLC_CORE_UNKNOWN : (uint8_t)(w >> 4)) << 8 | (uint64_t)fl << 16;
      memcpy(&e->handle, &hw, 8);
      memcpy(&e->type, &tail, 8);
    }
#else
    e->handle = h;
    e->raw = w;
    e->type = (uint8_t)type;
    e->core = sh ? TLC_CORE_UNKNOWN : (uint8_t)(w >> 4);
    e->flags = fl;
    e->reserved_ = 0;
#endif
    e->evlog = NULL;
    if (TLC_UNLIKELY_DEC((int64_t)(prev - t) > tol)) { /* a step back: the look-ahead */
      int c = strict_restart(d, v, p, sh, (int64_t)prev);
      if (c < 0) {
        if (k == *n) /* the reset's gap is still to be reported */
          st->gap = fl != 0;
        rc = NEED; /* held (not delivered) until the records after it are there */
        break;
      }
      if (c > 0)
        e->flags |= TLC_EVF_RESTART;
    }
    prev = t;
    fl = 0;
  }
  st->cur = p;
  if (k > k0) {
    st->last = (int64_t)prev;
    st->have_last = 1;
  }
  *n = k;
  return rc;
}

static int run_strict(tlc_dec_t *d, const view_t *v, tlc_event_t *ev, size_t max, size_t *n) {
  /* inlined per format and for the default tolerance (a constant in the step-back test) */
  if (d->opts.time_tolerance_ns == TLC_DEC_TOLERANCE_NS)
    return d->format == TLC_FMT_BIN10 ? strict_loop(d, v, ev, max, n, 24, TLC_DEC_TOLERANCE_NS)
                                      : strict_loop(d, v, ev, max, n, 0, TLC_DEC_TOLERANCE_NS);
  return d->format == TLC_FMT_BIN10 ? strict_loop(d, v, ev, max, n, 24, 0)
                                    : strict_loop(d, v, ev, max, n, 0, 0);
}

/* ---- resync mode ---------------------------------------------------------------------- */

#define AVAIL(v, x) ((x) + REC <= (v)->end)
#define AT(v, x)    ((v)->b + ((x) - (v)->off))

/* Links of the run starting at q, counted up to `cap`; -1 when more bytes are needed to know.
 * *cut is set when the stream's end (not a failing link) stopped the count. */
static int run_links(const tlc_dec_t *d, const view_t *v, uint64_t q, unsigned sh, unsigned cap,
                     int *cut) {
  int64_t tol = d->opts.time_tolerance_ns, tp = rec_time(AT(v, q));
  unsigned i;
  *cut = 0;
  for (i = 1; i <= cap; i++) {
    uint64_t x = q + (uint64_t)i * REC;
    const uint8_t *r;
    int64_t t;
    if (!AVAIL(v, x)) {
      *cut = 1;
      return v->final ? (int)i - 1 : -1;
    }
    r = AT(v, x);
    t = rec_time(r);
    if (!plausible(r, sh) || !not_before(t, tp, tol) || !within_step(t, tp, TLC_BIN1X_MAX_STEP_NS))
      return (int)i - 1;
    tp = t;
  }
  return (int)cap;
}

/* run(q): 1 yes, 0 no, -1 more bytes needed. At the end of the stream a shorter run counts
 * when it has at least one link. */
static int confirmed(const tlc_dec_t *d, const view_t *v, uint64_t q, unsigned sh) {
  int cut, k = run_links(d, v, q, sh, d->opts.confirm, &cut);
  if (k < 0)
    return -1;
  return (unsigned)k >= d->opts.confirm || (cut && k >= 1);
}

static void emit(tlc_dec_t *d, const view_t *v, uint64_t p, tlc_event_t *e, uint16_t flags) {
  tlc_bin1x_state_t *st = &d->u.bin;
  const uint8_t *r = AT(v, p);
  decode(r, p, type_shift(d->format), (uint16_t)(flags | (st->gap ? TLC_EVF_GAP : 0)), e);
  st->gap = 0;
  st->last = e->time_ns;
  st->have_last = 1;
  st->cur = p + REC;
}

/* Bytes in no record, told to the caller (tlc_dec_opts_t.skipped_cb). */
static void tell_skipped(tlc_dec_t *d, uint64_t from, const uint8_t *p, size_t k) {
  if (k > 0 && d->opts.skipped_cb != NULL)
    d->opts.skipped_cb(d->opts.skipped_ud, from, p, k);
}

/* Skips the k bytes of the view from `from` on (they are in it: keep_from holds them). */
static void skip_bytes(tlc_dec_t *d, const view_t *v, uint64_t from, uint64_t k) {
  if (k == 0)
    return;
  INVARIANT(from >= v->off && from + k <= v->end);
  tell_skipped(d, from, AT(v, from), (size_t)k);
  d->c.bytes_skipped += k;
  d->u.bin.gap = 1;
  d->u.bin.skipped = 1;
}

/* Takes the candidate at q after a loss of sync (flags: TLC_EVF_RESTART or 0). */
static void regain(tlc_dec_t *d, const view_t *v, uint64_t q, tlc_event_t *e, uint16_t flags) {
  tlc_bin1x_state_t *st = &d->u.bin;
  skip_bytes(d, v, st->lost_from, q - st->lost_from);
  if (st->skipped) {
    d->c.resyncs++;
    d->c.records_invalid += st->pending_invalid;
  }
  st->skipped = 0;
  st->pending_invalid = 0;
  st->lost = 0;
  emit(d, v, q, e, flags);
}

/* The confirmed run at q (as far as the view holds it, at most confirm + 1 records) lies wholly
 * more than tol below L: the target's clock restarted there (a board reset). */
static int restart_run(const tlc_dec_t *d, const view_t *v, uint64_t q) {
  const tlc_bin1x_state_t *st = &d->u.bin;
  int64_t tol = d->opts.time_tolerance_ns;
  unsigned i;
  uint64_t x;
  for (i = 0, x = q; i <= d->opts.confirm && AVAIL(v, x); i++, x += REC)
    if (not_before(rec_time(AT(v, x)), st->last, tol))
      return 0;
  return i >= 2;
}

/* Strict mode: the record at p lies more than tol below the one before it (time prev). 1 when
 * it starts a clock restart (a board reset while its connection stays open), as a resync
 * decoder's restart_run: it and the next `confirm` records (at the end of the stream, at least
 * one more) are valid, all more than tol below prev, each within [-tol, +STEP] of the one
 * before; 0 when not (a lone wild time: delivered as it is, the engine's out-of-order case);
 * -1 when more bytes are needed to know. */
static NOINLINE int strict_restart(const tlc_dec_t *d, const view_t *v, uint64_t p, unsigned sh,
                                   int64_t prev) {
  int64_t tol = d->opts.time_tolerance_ns, tp = rec_time(AT(v, p));
  unsigned i;
  for (i = 1; i <= d->opts.confirm; i++) {
    uint64_t x = p + (uint64_t)i * REC;
    const uint8_t *r;
    int64_t t;
    if (!AVAIL(v, x))
      return v->final ? i >= 2 : -1;
    r = AT(v, x);
    t = rec_time(r);
    if (!plausible(r, sh) || not_before(t, prev, tol) || !not_before(t, tp, tol) ||
        !within_step(t, tp, TLC_BIN1X_MAX_STEP_NS))
      return 0;
    tp = t;
  }
  return 1;
}

/* t within [last - tol, last + STEP]. */
static inline int near_last(const tlc_bin1x_state_t *st, int64_t t, int64_t tol) {
  return not_before(t, st->last, tol) && within_step(t, st->last, TLC_BIN1X_MAX_STEP_NS);
}

/* In sync: 1 deliver the record at p, 0 reject it, -1 more bytes needed. */
static int judge(const tlc_dec_t *d, const view_t *v, uint64_t p, unsigned sh) {
  const tlc_bin1x_state_t *st = &d->u.bin;
  int64_t tol = d->opts.time_tolerance_ns, t, ts;
  const uint8_t *r = AT(v, p), *s;
  if (!plausible(r, sh))
    return 0;
  t = rec_time(r);
  if (!near_last(st, t, tol))
    return 0;
  if (!AVAIL(v, p + REC))
    return v->final ? 1 : -1;
  s = AT(v, p + REC);
  ts = rec_time(s);
  /* The successor agrees with the history but not with this record: this one is off. */
  return !(plausible(s, sh) && not_before(ts, st->last, tol) && !not_before(ts, t, tol));
}

/* Scores the run at q for picking among nearby candidates: odd records first (bits set where
 * writers leave zeros: bin11 flags bits 12-31, bin10 event bits other than 24-27, and the upper
 * half of the 32-bit data field), then the time variation along the run (real steps are tiny;
 * a read one byte early keeps a run monotone but makes every step 256 times wider; reads that
 * take handles or flags for times jump about), then |time|. Lower is better. */
typedef struct score {
  unsigned odd;
  uint64_t var, mag;
} score_t;

static score_t score_run(const tlc_dec_t *d, const view_t *v, uint64_t q) {
  uint32_t unused = d->format == TLC_FMT_BIN10 ? 0xF0FFFFFFu : 0xFFFFF000u;
  int64_t tp = rec_time(AT(v, q));
  score_t sc;
  uint64_t x;
  unsigned i;
  sc.odd = 0;
  sc.var = 0;
  sc.mag = tp < 0 ? 0 - (uint64_t)tp : (uint64_t)tp;
  for (i = 0, x = q; i <= d->opts.confirm && AVAIL(v, x); i++, x += REC) {
    const uint8_t *r = AT(v, x);
    int64_t t = rec_time(r);
    uint64_t step = t >= tp ? (uint64_t)t - (uint64_t)tp : (uint64_t)tp - (uint64_t)t;
    sc.odd += (ld32(r + 4) & unused) != 0 || ld32(r + 12) != 0;
    sc.var = sc.var + step < sc.var ? UINT64_MAX : sc.var + step;
    tp = t;
  }
  return sc;
}

static void pick_clear(tlc_bin1x_pick_t *pk) {
  pk->first = pk->best = NONE;
}

/* Notes candidate q in pk if it is within a record's length of the first one and better. */
static void pick_note(tlc_bin1x_pick_t *pk, uint64_t q, const score_t *sc) {
  if (pk->first == NONE) {
    pk->first = q;
  } else if (q >= pk->first + REC || (sc->odd != pk->odd   ? sc->odd > pk->odd
                                      : sc->var != pk->var ? sc->var > pk->var
                                                           : sc->mag >= pk->mag)) {
    return;
  }
  pk->best = q;
  pk->odd = sc->odd;
  pk->var = sc->var;
  pk->mag = sc->mag;
}

/* The pick is complete once the scan is a record's length past its first candidate. */
static int pick_done(const tlc_bin1x_pick_t *pk, uint64_t q) {
  return pk->first != NONE && q >= pk->first + REC;
}

static int run_resync(tlc_dec_t *d, const view_t *v, tlc_event_t *ev, size_t max, size_t *n) {
  tlc_bin1x_state_t *st = &d->u.bin;
  unsigned sh = type_shift(d->format);
  int64_t tol = d->opts.time_tolerance_ns;

  for (;;) {
    uint64_t q;
    int ok, wend;
    if (*n >= max)
      return STOP;
    if (!st->lost) {
      uint64_t p = st->cur;
      if (!AVAIL(v, p))
        return v->final ? DONE : NEED;
      ok = st->have_last ? judge(d, v, p, sh) : 0;
      if (ok < 0)
        return NEED;
      if (ok) {
        emit(d, v, p, &ev[(*n)++], 0);
        continue;
      }
      st->lost = 1;
      st->lost_from = st->scan = p;
      pick_clear(&st->any);
      pick_clear(&st->clean);
      st->pending_invalid = st->have_last;
      continue;
    }
    /* Lost. A clean run near the history is taken at once (below); otherwise the scan covers
     * the window and takes the best clean candidate, else the best of any (with no history, a
     * clean pick is taken as soon as it is complete). */
    q = st->scan;
    wend = q - st->lost_from >= TLC_BIN1X_WINDOW;
    if (pick_done(&st->clean, q) && (wend || !st->have_last)) {
      regain(d, v, st->clean.best, &ev[(*n)++], 0);
      continue;
    }
    if (wend && st->clean.first == NONE && pick_done(&st->any, q)) {
      regain(d, v, st->any.best, &ev[(*n)++], 0);
      continue;
    }
    if (wend && st->any.first == NONE) {
      skip_bytes(d, v, st->lost_from, q - st->lost_from);
      st->lost_from = q;
      wend = 0;
    }
    if (!AVAIL(v, q)) {
      if (!v->final)
        return NEED;
      if (st->clean.first != NONE || st->any.first != NONE) {
        regain(d, v, st->clean.first != NONE ? st->clean.best : st->any.best, &ev[(*n)++], 0);
        continue;
      }
      skip_bytes(d, v, st->lost_from, v->end - st->lost_from);
      st->lost_from = st->scan = v->end;
      return DONE;
    }
    if (!plausible(AT(v, q), sh)) {
      st->scan = q + 1;
      continue;
    }
    ok = confirmed(d, v, q, sh);
    if (ok < 0)
      return NEED;
    if (ok) {
      score_t sc = score_run(d, v, q);
      if (st->have_last && sc.odd == 0 && near_last(st, rec_time(AT(v, q)), tol)) {
        regain(d, v, q, &ev[(*n)++], 0);
        continue;
      }
      /* At the loss point itself, a clean run wholly below L is a clock restart: taken at once,
       * flagged for the engine (it is no noise; nothing was skipped). */
      if (st->have_last && sc.odd == 0 && q == st->lost_from && restart_run(d, v, q)) {
        regain(d, v, q, &ev[(*n)++], TLC_EVF_RESTART);
        continue;
      }
      /* Past the window's end only picks already started are completed, which bounds the
       * look-ahead by TLC_BIN1X_HOLD. */
      if (!wend || st->any.first != NONE)
        pick_note(&st->any, q, &sc);
      if (sc.odd == 0 && (!wend || st->clean.first != NONE))
        pick_note(&st->clean, q, &sc);
    }
    st->scan = q + 1;
  }
}

/* ---- buffering ------------------------------------------------------------------------ */

/* First stream offset the decoder still needs. */
static uint64_t keep_from(const tlc_dec_t *d) {
  const tlc_bin1x_state_t *st = &d->u.bin;
  return st->lost ? st->lost_from : st->cur;
}

static int run(tlc_dec_t *d, const view_t *v, tlc_event_t *ev, size_t max, size_t *n) {
  return d->opts.resync ? run_resync(d, v, ev, max, n) : run_strict(d, v, ev, max, n);
}

/* Drops window bytes before `keep`. */
static void compact(tlc_bin1x_state_t *st, uint64_t keep) {
  size_t drop = (size_t)(keep - st->wbase);
  if (drop == 0)
    return;
  if (drop >= st->wlen) {
    st->wlen = 0;
  } else {
    memmove(st->win, st->win + drop, st->wlen - drop);
    st->wlen -= drop;
  }
  st->wbase = keep;
}

static void start_stream(tlc_dec_t *d) {
  tlc_bin1x_state_t *st = &d->u.bin;
  st->wlen = 0;
  st->wbase = st->cur = st->lost_from = st->scan = d->pos;
  pick_clear(&st->any);
  pick_clear(&st->clean);
  st->last = 0;
  st->have_last = 0;
  st->lost = d->opts.resync ? 1 : 0;
  st->skipped = 0;
  st->pending_invalid = 0;
}

int tlc__bin1x_init(tlc_dec_t *d) {
  start_stream(d);
  d->u.bin.gap = 0;
  return 0;
}

int tlc__bin1x_push(tlc_dec_t *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                    size_t max) {
  tlc_bin1x_state_t *st = &d->u.bin;
  uint64_t in0 = d->pos, keep;
  size_t n = 0, ipos = 0;
  int rc = NEED;
  view_t v;

  *used = 0;
  if (len == 0 || max == 0)
    return 0;
  /* Bytes held from earlier pushes: decide in the window until the decisions reach bytes of
   * this push, then give the copied bytes back and decode from `in` directly. */
  while (st->wlen > 0 && ipos < len) {
    size_t k = len - ipos;
    if (k > sizeof(st->win) - st->wlen)
      k = sizeof(st->win) - st->wlen;
    memcpy(st->win + st->wlen, in + ipos, k);
    st->wlen += k;
    ipos += k;
    v.b = st->win;
    v.off = st->wbase;
    v.end = st->wbase + st->wlen;
    v.final = 0;
    rc = run(d, &v, ev, max, &n);
    keep = keep_from(d);
    /* A full window always allows a decision (TLC_BIN1X_HOLD covers the longest look-ahead). */
    INVARIANT(rc != NEED || keep > st->wbase || st->wlen < sizeof(st->win));
    if (keep >= in0) {
      ipos = (size_t)(keep - in0);
      st->wlen = 0;
      st->wbase = keep;
      break;
    }
    compact(st, keep);
    if (rc != NEED)
      goto out;
  }
  if (st->wlen == 0 && ipos < len && rc != STOP && rc != FAIL) {
    v.b = in + ipos;
    v.off = in0 + ipos;
    v.end = in0 + len;
    v.final = 0;
    rc = run(d, &v, ev, max, &n);
    keep = keep_from(d);
    if (rc == NEED) {
      size_t rest = (size_t)(v.end - keep);
      INVARIANT(rest <= sizeof(st->win)); /* the look-ahead never exceeds TLC_BIN1X_HOLD */
      memcpy(st->win, AT(&v, keep), rest);
      st->wlen = rest;
      ipos = len;
    } else {
      ipos = (size_t)(keep - in0);
    }
    st->wbase = keep;
  }
out:
  *used = ipos;
  d->pos += ipos;
  d->c.bytes += ipos;
  d->c.records += n;
  if (rc == FAIL && n == 0)
    return d->err;
  return (int)n;
}

int tlc__bin1x_finish(tlc_dec_t *d, tlc_event_t *ev, size_t max) {
  tlc_bin1x_state_t *st = &d->u.bin;
  size_t n = 0;
  int rc;
  view_t v;

  if (max == 0)
    return 0;
  v.b = st->win;
  v.off = st->wbase;
  v.end = st->wbase + st->wlen;
  v.final = 1;
  rc = run(d, &v, ev, max, &n);
  compact(st, keep_from(d));
  d->c.records += n;
  if (rc == FAIL)
    return n > 0 ? (int)n : d->err;
  if (n > 0)
    return (int)n;
  if (st->wlen > 0) {
    tell_skipped(d, st->wbase, st->win, st->wlen);
    d->c.truncated += st->wlen;
    d->err_offset = st->wbase;
    snprintf(d->err_reason, sizeof(d->err_reason), "truncated record at byte %llu: %zu of %d bytes",
             (unsigned long long)st->wbase, st->wlen, REC);
    start_stream(d);
    st->gap = 0;
    return TLC_ETRUNC;
  }
  start_stream(d);
  st->gap = 0;
  return 0;
}

/* Idle line (tlc_dec_idle): in sync, a held record needs only its successor to be delivered
 * (judge); with no successor coming for a while, it is delivered if it is plausible and near L,
 * as at the end of a stream. Stops at the first one that is not (the next push judges it). */
int tlc__bin1x_idle(tlc_dec_t *d, tlc_event_t *ev, size_t max) {
  tlc_bin1x_state_t *st = &d->u.bin;
  unsigned sh = type_shift(d->format);
  size_t n = 0;
  view_t v;
  if (!d->opts.resync || st->lost || !st->have_last)
    return 0; /* (strict: what it holds waits for the records that decide it) */
  v.b = st->win;
  v.off = st->wbase;
  v.end = st->wbase + st->wlen;
  v.final = 0;
  while (n < max && st->cur >= v.off && AVAIL(&v, st->cur)) {
    const uint8_t *r = AT(&v, st->cur);
    if (AVAIL(&v, st->cur + REC) || !plausible(r, sh) ||
        !near_last(st, rec_time(r), d->opts.time_tolerance_ns))
      break; /* a successor is there (push judges with it), or not a record to take alone */
    emit(d, &v, st->cur, &ev[n++], 0);
  }
  if (n > 0) {
    compact(st, keep_from(d));
    d->c.records += n;
  }
  return (int)n;
}

void tlc__bin1x_reset(tlc_dec_t *d) {
  tlc_bin1x_state_t *st = &d->u.bin;
  if (st->wlen > 0) {
    tell_skipped(d, st->wbase, st->win, st->wlen);
    d->c.bytes_skipped += st->wlen;
    st->gap = 1;
  }
  if (st->lost)
    d->c.records_invalid += st->pending_invalid;
  start_stream(d);
}

/* ---- encoder and detection ------------------------------------------------------------ */

void tlc_bin1x_encode(tlc_format_t f, const tlc_event_t *ev, uint8_t out[TLC_BIN1X_RECORD]) {
  uint32_t w = ev->raw;
  if (f == TLC_FMT_BIN10) {
    if (((w >> 24) & 0xF) != ev->type)
      w = (uint32_t)(ev->type & 0xF) << 24;
  } else if ((w & 0xF) != ev->type || ((w >> 4) & 0xFF) != ev->core) {
    w = (uint32_t)ev->core << 4 | (ev->type & 0xFu);
  }
  st32(out, ev->handle);
  st32(out + 4, w);
  st64(out + 8, ev->data);
  st64(out + 16, (uint64_t)ev->time_ns);
}

void tlc_bin1x_read_records(tlc_format_t f, const uint8_t *buf, size_t n, uint64_t base,
                            tlc_event_t *ev) {
  unsigned sh = type_shift(f);
  for (size_t i = 0; i < n; i++)
    decode(buf + i * REC, base + i * REC, sh, 0, &ev[i]);
}

size_t tlc_bin1x_plausible_run(tlc_format_t f, const uint8_t *buf, size_t len) {
  /* Stricter than the decoder: the bits a writer of that version leaves zero must be zero, so
   * that a bin10 event word (type in bits 24-27) fails as bin11 and a bin11 flags word (type
   * and core in bits 0-11) fails as bin10. A word of 0 (Exit on core 0) fits both. */
  uint32_t zero = f == TLC_FMT_BIN10 ? 0x00000FFFu : 0xFFFFF000u;
  unsigned sh = type_shift(f);
  size_t i, whole = len / REC;
  int64_t prev = 0;
  if (f != TLC_FMT_BIN10 && f != TLC_FMT_BIN11)
    return 0;
  for (i = 0; i < whole; i++) {
    const uint8_t *r = buf + i * REC;
    int64_t t = rec_time(r);
    if (!plausible(r, sh) || (ld32(r + 4) & zero) != 0)
      break;
    if (i > 0 && !not_before(t, prev, DETECT_TOL))
      break;
    prev = t;
  }
  return i;
}
