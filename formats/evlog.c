/* evlog.c - streaming decoder and encoder for EFL Eina evlog blocks.
 *
 * A stream is a sequence of blocks; a block is a 12-byte header and `size` bytes of items:
 *
 *   block:  +0 u32 magic 0x0ffee211 | +4 u32 size | +8 u32 overflow | +12 items[size bytes]
 *   item:   +0  f64 tim          seconds, CLOCK_MONOTONIC of the writer
 *           +8  f64 srctim       0.0 unless a source time is known
 *           +16 u64 thread
 *           +24 u64 obj
 *           +32 u16 event_offset always 40
 *           +34 u16 detail_offset 0 = no detail
 *           +36 u16 event_next   bytes to the next item: a multiple of 8
 *           +38 2 bytes padding  (stale memory, like the string padding: never checked)
 *           +40 "event\0" ["detail\0"] padding to event_next
 *
 * Byte orders, as real files have them. The magic gives the header's order; the size and
 * overflow words are read in that order unless the size is implausible there (> max_block,
 * not a multiple of 8, or 1..47: smaller than one item) and plausible in the other order, in
 * which case both words are read in the other order (efl_debug writes its host's order, other
 * writers may not). Both readings are plausible only for multiples of 256 below 16 MiB with
 * max_block 64 MiB (the low and high bytes must be 0); then the order learned from an earlier
 * header of the stream whose size was plausible in one order only wins, else the magic's. So a
 * writer whose size order differs from its magic order is misread (an error, or a resync) only
 * in such ambiguous blocks before its first unambiguous one. The item order is taken per block
 * from the first item's event_offset, which is 40: 40 read little-endian means little-endian
 * items (eina on every host), 40 read big-endian means big-endian items (a non-eina writer);
 * every later item of the block must read 40 in that order.
 *
 * Checks (any failure makes the header or item invalid): magic in either order; plausible
 * size; event_offset 40; event_next a multiple of 8, >= 48 and within the bytes left in the
 * block; detail_offset 0 or in [40, event_next); the event string, and the detail if present,
 * NUL-terminated before event_next; tim * 1e9 finite and within int64. The items must fill the
 * block exactly: 8..40 bytes left at the end of a block (too few for an item) are invalid. An
 * empty block (size 0) is valid and yields no event (so it is not reproduced by the encoder);
 * an overflow count > 0 on it still puts TLC_EVF_GAP on the next event. efl_debug's bogus
 * block size 0xfffffffc for an empty capture is rejected as > max_block before anything is
 * allocated or waited for.
 *
 * Streaming: the unconsumed input is carry[carry_off..carry_len) followed by the current
 * chunk. A unit (header, item) is decoded in place from the chunk when it lies wholly in it,
 * else it is gathered in the carry buffer, allocated once by init with room for a maximal item
 * (65528 bytes: event_next is a u16) and a second one, so a whole block is never buffered.
 * Events point into the chunk or the carry; carry bytes an event of the current batch points
 * at are never moved or overwritten in the same call (the batch is returned first), and the
 * carry is compacted at the start of the next call. A push returns at most TLC_EVLOG_BATCH
 * events, whose extensions live in an array allocated by init. Events are the same for every
 * chunking: each decision depends only on the bytes, never on where a chunk ends.
 *
 * Resync mode: an invalid header is skipped from its second byte, an invalid item from its
 * first (the rest of its block is lost), by scanning for the magic in either byte order. A
 * damaged length can make an accepted header or item swallow the start of the next block's
 * header, so when the unit rejected directly follows an accepted one, a magic that begins in
 * that unit's last 11 bytes and continues in front of us is taken first (straddle); and an item
 * that holds a whole magic is rejected (in resync mode only: an intact item with those 4 bytes
 * in a field or its stale padding loses the rest of its block, about 2^-31 per byte). With
 * these, every intact block after a damaged one is delivered exactly (test_resync_damage).
 * Counted: records_invalid per invalid header or item (a false magic met while scanning counts
 * too), resyncs per loss of sync, bytes_skipped per byte scanned past. The first event after
 * lost bytes carries TLC_EVF_GAP. Each byte is looked at a bounded number of times.
 *
 * Cost: O(1) per byte plus a memchr over each item's strings (and, resyncing, a magic search
 * over the item); one memcpy per item only when it straddles chunks. No allocation after init. What
 * it does not do: map events to areas (evmap.c), reorder items of different threads (not in time
 * order in real files), check that the strings follow each other canonically, or check padding.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { PH_HEADER = 0, PH_ITEMS = 1, PH_SCAN = 2 };

#define MAX_BLOCK_LIMIT (64u << 20)

/* ---- byte order helpers ------------------------------------------------------------------ */

static uint64_t rd_n(const uint8_t *p, unsigned n, int be) {
  uint64_t v = 0;
  unsigned i;
  for (i = 0; i < n; i++)
    v |= (uint64_t)p[be ? n - 1 - i : i] << (8 * i);
  return v;
}

static uint16_t rd16(const uint8_t *p, int be) {
  return (uint16_t)rd_n(p, 2, be);
}

static uint32_t rd32(const uint8_t *p, int be) {
  return (uint32_t)rd_n(p, 4, be);
}

static uint64_t rd64(const uint8_t *p, int be) {
  return rd_n(p, 8, be);
}

static double rdf64(const uint8_t *p, int be) {
  uint64_t u = rd64(p, be);
  double x;
  memcpy(&x, &u, sizeof(x));
  return x;
}

static void wr_n(uint8_t *p, uint64_t v, unsigned n, int be) {
  unsigned i;
  for (i = 0; i < n; i++)
    p[be ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

static void wrf64(uint8_t *p, double x, int be) {
  uint64_t u;
  memcpy(&u, &x, sizeof(u));
  wr_n(p, u, 8, be);
}

static const char *bad_size(uint32_t size, uint32_t max_block, char *why, size_t whylen);

int tlc_evlog_size_ok(uint32_t size, uint32_t max_block) {
  char why[96];
  return bad_size(size, max_block ? max_block : 64u << 20, why, sizeof why) == NULL;
}

int tlc_evlog_index_time(double tim, int64_t *ns) {
  if (!isfinite(tim) || fabs(tim) >= 9.0e9)
    return 0;
  *ns = (int64_t)llround(tim * 1e9);
  return 1;
}

int tlc_evlog_looks_like(const uint8_t *buf, size_t len) {
  return len >= 4 && (rd32(buf, 0) == TLC_EVLOG_MAGIC || rd32(buf, 1) == TLC_EVLOG_MAGIC);
}

/* ---- decoder ----------------------------------------------------------------------------- */

/* The read cursor of one call: unconsumed bytes are the carry's, then in[ipos..len). */
typedef struct rd {
  tlc_dec_t *d;
  tlc_evlog_state_t *st;
  const uint8_t *in;
  size_t len, ipos;
  int pinned; /* an event of this batch points into the carry */
  int stop;   /* return the batch now (the carry cannot be compacted under it) */
} rd_t;

int tlc__evlog_init(tlc_dec_t *d) {
  tlc_evlog_state_t *st = &d->u.ev;
  memset(st, 0, sizeof(*st));
  if (d->opts.max_block > MAX_BLOCK_LIMIT)
    return TLC_EINVAL;
  st->ext = tlc_calloc(TLC_EVLOG_BATCH, sizeof(*st->ext));
  if (st->ext == NULL)
    return TLC_ENOMEM;
  st->carry = tlc_malloc(TLC_EVLOG_CARRY);
  if (st->carry == NULL) {
    tlc_free(st->ext);
    st->ext = NULL;
    return TLC_ENOMEM;
  }
  st->at = d->pos;
  return 0;
}

void tlc__evlog_fini(tlc_dec_t *d) {
  tlc_evlog_state_t *st = &d->u.ev;
  tlc_free(st->carry);
  tlc_free(st->ext);
  st->carry = NULL;
  st->ext = NULL;
}

static size_t held(const rd_t *r) {
  return r->st->carry_len - r->st->carry_off;
}

static size_t avail(const rd_t *r) {
  return held(r) + (r->len - r->ipos);
}

static uint8_t peek(const rd_t *r, size_t k) {
  size_t h = held(r);
  return k < h ? r->st->carry[r->st->carry_off + k] : r->in[r->ipos + (k - h)];
}

/* Room for `add` more bytes at the carry's tail, compacting if no event points into it. */
static int make_room(rd_t *r, size_t add) {
  tlc_evlog_state_t *st = r->st;
  if (st->carry_len + add <= TLC_EVLOG_CARRY)
    return 1;
  if (r->pinned) {
    r->stop = 1;
    return 0;
  }
  memmove(st->carry, st->carry + st->carry_off, held(r));
  st->carry_len -= st->carry_off;
  st->carry_off = 0;
  return 1;
}

static void take_input(rd_t *r, size_t add) {
  if (add == 0)
    return; /* finish passes no input at all (in may be NULL) */
  memcpy(r->st->carry + r->st->carry_len, r->in + r->ipos, add);
  r->st->carry_len += add;
  r->ipos += add;
}

/* A pointer to `need` (<= TLC_EVLOG_MAX_ITEM) contiguous unconsumed bytes, *fc = 1 if they are
 * in the carry; or NULL when the input is used up (taken into the carry) or r->stop is set. */
static const uint8_t *contig(rd_t *r, size_t need, int *fc) {
  size_t h = held(r), ia = r->len - r->ipos, add;
  *fc = 0;
  if (h == 0 && ia >= need)
    return r->in + r->ipos;
  *fc = 1;
  if (h >= need)
    return r->st->carry + r->st->carry_off;
  add = need - h;
  if (add > ia)
    add = ia;
  if (!make_room(r, add))
    return NULL;
  take_input(r, add);
  return h + add >= need ? r->st->carry + r->st->carry_off : NULL;
}

static void consume(rd_t *r, size_t k) {
  tlc_evlog_state_t *st = r->st;
  size_t h = held(r);
  if (k <= h) {
    st->carry_off += k;
  } else {
    st->carry_off = st->carry_len;
    r->ipos += k - h;
  }
  if (st->carry_off == st->carry_len && !r->pinned)
    st->carry_off = st->carry_len = 0;
  st->at += k;
}

/* Bytes in no block, told to the caller (tlc_dec_opts_t.skipped_cb). */
static void tell_skipped(tlc_dec_t *d, uint64_t from, const uint8_t *p, size_t k) {
  if (k > 0 && d->opts.skipped_cb != NULL)
    d->opts.skipped_cb(d->opts.skipped_ud, from, p, k);
}

/* Skips the next k unconsumed bytes (scanning for a magic), telling the caller. */
static void skip(rd_t *r, size_t k) {
  size_t h = held(r);
  size_t kh = k < h ? k : h;
  tell_skipped(r->d, r->st->at, r->st->carry + r->st->carry_off, kh);
  tell_skipped(r->d, r->st->at + kh, r->in + r->ipos, k - kh);
  r->d->c.bytes_skipped += k;
  consume(r, k);
}

static int is_magic(uint8_t a, uint8_t b, uint8_t c, uint8_t e) {
  return (a == 0x11 && b == 0xe2 && c == 0xfe && e == 0x0f) ||
         (a == 0x0f && b == 0xfe && c == 0xe2 && e == 0x11);
}

static const uint8_t MAGIC_BYTES[2][4] = { { 0x11, 0xe2, 0xfe, 0x0f }, { 0x0f, 0xfe, 0xe2, 0x11 } };

/* Resync, rejecting an item or a header right after an accepted unit: does a magic begin in
 * the last 11 bytes of that unit (a header's bytes 1..11, an item's last 11) and continue in
 * front of us? A damaged length can make an accepted header or item swallow the start of the
 * next block's header; the header is then parsed from the magic's first byte, its first `pre`
 * bytes taken from `tail`. The earliest such magic wins. */
static void straddle(rd_t *r) {
  tlc_evlog_state_t *st = r->st;
  unsigned c, o, i, pre;
  for (c = 0; c < st->tail_len; c++) {
    pre = st->tail_len - c;
    if (pre < 4 && avail(r) < 4 - pre)
      continue;
    for (o = 0; o < 2; o++) {
      const uint8_t *m = MAGIC_BYTES[o];
      for (i = 0; i < 4 && (i < pre ? st->tail[c + i] : peek(r, i - pre)) == m[i]; i++)
        ;
      if (i == 4) {
        memmove(st->tail, st->tail + c, pre);
        st->hdr_pre = (uint8_t)pre;
        st->phase = PH_HEADER;
        return;
      }
    }
  }
}

static int invalid(rd_t *r, uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Invalid header or item at stream offset `off`. Strict: the sticky error, returned. Resync:
 * counted, and scanning starts at the current position (or a header that began in the last
 * bytes of the item before, see straddle); returns 1 (progress). */
static int invalid(rd_t *r, uint64_t off, const char *fmt, ...) {
  tlc_dec_t *d = r->d;
  tlc_evlog_state_t *st = r->st;
  int item = st->phase == PH_ITEMS;
  d->c.records_invalid++;
  if (!d->opts.resync) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err_reason, sizeof(d->err_reason), fmt, ap);
    va_end(ap);
    d->err_offset = off;
    d->err = TLC_EFRAME;
    return TLC_EFRAME;
  }
  if (!st->lost) {
    st->lost = 1;
    d->c.resyncs++;
  }
  st->gap = 1;
  st->phase = PH_SCAN;
  if (item || st->tail_len > 0)
    straddle(r);
  st->tail_len = 0;
  return 1;
}

/* Scans for a magic. Returns 1 when one is at the current position, 0 when more input is
 * needed (or the batch must be returned). */
static int step_scan(rd_t *r) {
  for (;;) {
    size_t i, end;
    if (held(r) > 0) {
      if (avail(r) < 4) {
        size_t ia = r->len - r->ipos;
        if (!make_room(r, ia))
          return 0;
        take_input(r, ia);
        return 0;
      }
      if (is_magic(peek(r, 0), peek(r, 1), peek(r, 2), peek(r, 3)))
        return 1;
      skip(r, 1);
      continue;
    }
    end = r->len;
    for (i = r->ipos; i + 4 <= end; i++) {
      const uint8_t *p = r->in + i;
      if ((p[0] == 0x11 || p[0] == 0x0f) && is_magic(p[0], p[1], p[2], p[3]))
        break;
    }
    if (i + 4 > end)
      i = end >= 3 && end - 3 > r->ipos ? end - 3 : r->ipos;
    skip(r, i - r->ipos);
    if (r->len - r->ipos >= 4)
      return 1;
    /* Fewer than 4 bytes left: they might begin a magic. */
    if (!make_room(r, r->len - r->ipos))
      return 0;
    take_input(r, r->len - r->ipos);
    return 0;
  }
}

/* Why a size is implausible, or NULL. */
static const char *bad_size(uint32_t size, uint32_t max_block, char *why, size_t whylen) {
  if (size == 0xfffffffcu) /* efl_debug's "size - 4" of an empty answer (docs/efl.md) */
    snprintf(why, whylen, "size 0xfffffffc: an empty efl_debug capture (no CPU/Freq/on handler)");
  else if (size > max_block)
    snprintf(why, whylen, "size %lu exceeds limit %lu", (unsigned long)size,
             (unsigned long)max_block);
  else if (size % 8 != 0)
    snprintf(why, whylen, "size %lu is not a multiple of 8", (unsigned long)size);
  else if (size != 0 && size < TLC_EVLOG_MIN_ITEM)
    snprintf(why, whylen, "size %lu is smaller than one item", (unsigned long)size);
  else
    return NULL;
  return why;
}

/* Returns 1 after accepting or rejecting (resync) a header, 0 when more input is needed, or
 * the strict error. */
static int step_header(rd_t *r) {
  tlc_dec_t *d = r->d;
  tlc_evlog_state_t *st = r->st;
  const uint8_t *p;
  uint32_t size, alt, overflow;
  int fc, mbe, sbe, rc, bad, badalt;
  unsigned pre = st->hdr_pre;
  uint8_t hb[TLC_EVLOG_HEADER];
  char why[96], why2[96];
  p = contig(r, TLC_EVLOG_HEADER - pre, &fc);
  if (p == NULL)
    return 0;
  if (pre > 0) {
    /* The header's first `pre` bytes ended the unit before (resync, see straddle). */
    memcpy(hb, st->tail, pre);
    memcpy(hb + pre, p, TLC_EVLOG_HEADER - pre);
    p = hb;
    st->at -= pre;
    st->hdr_pre = 0;
  }
  if (rd32(p, 0) == TLC_EVLOG_MAGIC)
    mbe = 0;
  else if (rd32(p, 1) == TLC_EVLOG_MAGIC)
    mbe = 1;
  else {
    rc = invalid(r, st->at, "evlog block at byte %llu: bad magic 0x%08lx",
                 (unsigned long long)st->at, (unsigned long)rd32(p, 0));
    goto reject;
  }
  /* The size order learned from an earlier unambiguous header of this stream, else the
   * magic's; the other order only when the size is implausible in this one. */
  sbe = st->sizes_known ? st->sizes_learned : mbe;
  size = rd32(p + 4, sbe);
  alt = rd32(p + 4, !sbe);
  bad = bad_size(size, d->opts.max_block, why, sizeof(why)) != NULL;
  badalt = bad_size(alt, d->opts.max_block, why2, sizeof(why2)) != NULL;
  if (bad && badalt) {
    rc = invalid(r, st->at, "evlog block at byte %llu: %s", (unsigned long long)st->at, why);
    goto reject;
  }
  if (bad) {
    sbe = !sbe;
    size = alt;
  }
  if (bad != badalt) {
    st->sizes_known = 1;
    st->sizes_learned = (uint8_t)sbe;
  }
  overflow = rd32(p + 8, sbe);
  st->block_offset = st->at;
  st->block_size = size;
  st->block_overflow = overflow;
  st->block_seq = st->next_seq++;
  st->block_left = size;
  st->magic_be = (uint8_t)mbe;
  st->sizes_be = (uint8_t)sbe;
  st->lost = 0;
  d->c.blocks++;
  if (overflow > 0) {
    d->c.overflow_blocks++;
    d->c.overflow_items += overflow;
    st->gap = 1;
  }
  memcpy(st->tail, p + 1, sizeof(st->tail));
  st->tail_len = sizeof(st->tail);
  st->at += pre;
  consume(r, TLC_EVLOG_HEADER - pre);
  st->phase = size > 0 ? PH_ITEMS : PH_HEADER;
  return 1;
reject:
  st->at += pre;
  if (rc < 0)
    return rc;
  /* Resync: skip the magic's first byte and look for the next one (unless a magic begins in the
   * item before, see straddle). */
  if (pre == 0 && st->phase == PH_SCAN)
    skip(r, 1);
  return 1;
}

/* Returns 2 after decoding an item into *ev, 1 after rejecting one (resync), 0 when more input
 * is needed, or the strict error. */
static int step_item(rd_t *r, tlc_event_t *ev, tlc_evlog_ext_t *x) {
  tlc_dec_t *d = r->d;
  tlc_evlog_state_t *st = r->st;
  unsigned long long at = st->at;
  const uint8_t *p;
  const char *evend, *detend = NULL;
  uint16_t eo, dof, en;
  int fc, be, first = st->block_left == st->block_size;
  double tim, ns;
  if (st->block_left < TLC_EVLOG_MIN_ITEM) {
    /* Resyncing looks 3 bytes ahead (straddle): wait for them, whatever the chunking. */
    if (d->opts.resync && contig(r, 3, &fc) == NULL)
      return 0;
    return invalid(r, at,
                   "evlog block at byte %llu: %lu bytes left at byte %llu, fewer than an item",
                   (unsigned long long)st->block_offset, (unsigned long)st->block_left, at);
  }
  p = contig(r, TLC_EVLOG_ITEM, &fc);
  if (p == NULL)
    return 0;
  if (first) {
    if (rd16(p + 32, 0) == TLC_EVLOG_ITEM)
      be = 0;
    else if (rd16(p + 32, 1) == TLC_EVLOG_ITEM)
      be = 1;
    else
      return invalid(r, at, "evlog item at byte %llu: event_offset 0x%04x is not 40", at,
                     (unsigned)rd16(p + 32, 0));
  } else {
    be = st->item_be;
    eo = rd16(p + 32, be);
    if (eo != TLC_EVLOG_ITEM)
      return invalid(r, at, "evlog item at byte %llu: event_offset %u is not 40", at, (unsigned)eo);
  }
  dof = rd16(p + 34, be);
  en = rd16(p + 36, be);
  if (en % 8 != 0)
    return invalid(r, at, "evlog item at byte %llu: event_next %u is not a multiple of 8", at,
                   (unsigned)en);
  if (en < TLC_EVLOG_MIN_ITEM)
    return invalid(r, at, "evlog item at byte %llu: event_next %u leaves no room for the event", at,
                   (unsigned)en);
  if (en > st->block_left)
    return invalid(r, at,
                   "evlog item at byte %llu: event_next %u runs past the block end (%lu bytes "
                   "left in the block at byte %llu)",
                   at, (unsigned)en, (unsigned long)st->block_left,
                   (unsigned long long)st->block_offset);
  if (dof != 0 && (dof < TLC_EVLOG_ITEM || dof >= en))
    return invalid(r, at, "evlog item at byte %llu: detail_offset %u outside the item (40..%u)", at,
                   (unsigned)dof, (unsigned)en - 1u);
  p = contig(r, en, &fc);
  if (p == NULL)
    return 0;
  evend = memchr(p + TLC_EVLOG_ITEM, 0, en - TLC_EVLOG_ITEM);
  if (evend == NULL)
    return invalid(r, at, "evlog item at byte %llu: event string not terminated within item", at);
  if (dof != 0) {
    detend = memchr(p + dof, 0, (size_t)(en - dof));
    if (detend == NULL)
      return invalid(r, at, "evlog item at byte %llu: detail string not terminated within item",
                     at);
  }
  if (d->opts.resync) {
    /* A damaged length can make an item swallow the next block's header. */
    size_t i;
    for (i = 0; i + 4 <= en; i++)
      if ((p[i] == 0x11 || p[i] == 0x0f) && is_magic(p[i], p[i + 1], p[i + 2], p[i + 3]))
        return invalid(r, at, "evlog item at byte %llu: holds a block magic at byte %llu", at,
                       at + i);
  }
  tim = rdf64(p, be);
  ns = tim * 1e9;
  if (!(ns >= -9223372036854775808.0 && ns < 9223372036854775808.0))
    return invalid(r, at, "evlog item at byte %llu: time %g s is not a finite nanosecond count", at,
                   tim);

  x->tim = tim;
  x->srctim = rdf64(p + 8, be);
  x->obj = rd64(p + 24, be);
  x->event = (const char *)p + TLC_EVLOG_ITEM;
  x->detail = dof != 0 ? (const char *)p + dof : NULL;
  x->item = p;
  x->block_offset = st->block_offset;
  x->block_size = st->block_size;
  x->block_overflow = st->block_overflow;
  x->block_seq = st->block_seq;
  x->event_len = (uint16_t)(evend - x->event);
  x->detail_len = dof != 0 ? (uint16_t)(detend - x->detail) : 0;
  x->item_len = en;
  x->item_be = (uint8_t)be;
  x->header_be = st->magic_be;
  x->sizes_be = st->sizes_be;

  memset(ev, 0, sizeof(*ev));
  ev->time_ns = llround(ns);
  ev->thread = rd64(p + 16, be);
  ev->offset = st->at;
  ev->type = TLC_EV_NONE;
  ev->core = TLC_CORE_UNKNOWN;
  ev->evlog = x;
  if (st->gap) {
    ev->flags |= TLC_EVF_GAP;
    st->gap = 0;
  }
  st->item_be = (uint8_t)be;
  memcpy(st->tail, p + en - sizeof(st->tail), sizeof(st->tail));
  st->tail_len = sizeof(st->tail);
  if (fc)
    r->pinned = 1;
  consume(r, en);
  st->block_left -= en;
  if (st->block_left == 0) {
    ev->flags |= TLC_EVF_BLOCK_END;
    st->phase = PH_HEADER;
  }
  d->c.records++;
  return 2;
}

/* The decoding loop over carry + in[0..len); len may be 0 (finish drains the carry). */
static int run(tlc_dec_t *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
               size_t max) {
  tlc_evlog_state_t *st = &d->u.ev;
  rd_t r;
  size_t n = 0;
  int rc = 0;
  *used = 0;
  if (st->carry == NULL)
    return TLC_EINVAL;
  /* No event of an earlier call points into the carry any more. */
  if (st->carry_off > 0) {
    memmove(st->carry, st->carry + st->carry_off, st->carry_len - st->carry_off);
    st->carry_len -= st->carry_off;
    st->carry_off = 0;
  }
  memset(&r, 0, sizeof(r));
  r.d = d;
  r.st = st;
  r.in = in;
  r.len = len;
  if (max > TLC_EVLOG_BATCH)
    max = TLC_EVLOG_BATCH;
  while (n < max && !r.stop) {
    if (st->phase == PH_SCAN) {
      rc = step_scan(&r);
      if (rc == 0)
        break;
      st->phase = PH_HEADER;
    } else if (st->phase == PH_HEADER) {
      rc = step_header(&r);
    } else {
      rc = step_item(&r, &ev[n], &st->ext[n]);
      if (rc == 2)
        n++;
    }
    if (rc <= 0)
      break;
  }
  *used = r.ipos;
  d->pos += r.ipos;
  d->c.bytes += r.ipos;
  if (rc < 0 && n == 0)
    return rc;
  return (int)n;
}

int tlc__evlog_push(tlc_dec_t *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                    size_t max) {
  return run(d, in, len, used, ev, max);
}

static void forget(tlc_evlog_state_t *st, uint64_t pos) {
  st->carry_off = st->carry_len = 0;
  st->phase = PH_HEADER;
  st->lost = 0;
  st->sizes_known = 0;
  st->tail_len = 0;
  st->hdr_pre = 0;
  st->block_left = 0;
  st->at = pos;
}

int tlc__evlog_finish(tlc_dec_t *d, tlc_event_t *ev, size_t max) {
  tlc_evlog_state_t *st = &d->u.ev;
  size_t used, h;
  int n = run(d, NULL, 0, &used, ev, max);
  if (n != 0)
    return n;
  h = st->carry_len - st->carry_off;
  if (st->phase == PH_SCAN) {
    tell_skipped(d, st->at, st->carry + st->carry_off, h);
    d->c.bytes_skipped += h;
    forget(st, d->pos);
    return 0;
  }
  if (st->phase == PH_HEADER && h == 0) {
    forget(st, d->pos);
    return 0;
  }
  if (st->phase == PH_HEADER) {
    d->err_offset = st->at;
    snprintf(d->err_reason, sizeof(d->err_reason),
             "truncated evlog block at byte %llu: %zu of %d header bytes",
             (unsigned long long)st->at, h, TLC_EVLOG_HEADER);
    tell_skipped(d, st->at, st->carry + st->carry_off, h);
    d->c.truncated += h;
  } else {
    uint64_t present = st->at - st->block_offset + h;
    d->err_offset = st->block_offset;
    snprintf(d->err_reason, sizeof(d->err_reason),
             "truncated evlog block at byte %llu: %llu of %llu bytes",
             (unsigned long long)st->block_offset, (unsigned long long)present,
             (unsigned long long)st->block_size + TLC_EVLOG_HEADER);
    d->c.truncated += present;
  }
  forget(st, d->pos);
  st->gap = 1;
  return TLC_ETRUNC;
}

void tlc__evlog_reset(tlc_dec_t *d) {
  tlc_evlog_state_t *st = &d->u.ev;
  if (st->carry_len > st->carry_off || st->phase != PH_HEADER)
    st->gap = 1;
  forget(st, d->pos);
}

/* ---- encoder ----------------------------------------------------------------------------- */

int tlc_evlog_enc_init(tlc_evlog_enc_t *e, const tlc_evlog_enc_opts_t *opts) {
  memset(e, 0, sizeof(*e));
  if (opts != NULL)
    e->opts = *opts;
  if (e->opts.max_block == 0)
    e->opts.max_block = MAX_BLOCK_LIMIT;
  if (e->opts.max_block < TLC_EVLOG_MIN_ITEM || e->opts.max_block > MAX_BLOCK_LIMIT)
    return TLC_EINVAL;
  return 0;
}

void tlc_evlog_enc_fini(tlc_evlog_enc_t *e) {
  tlc_free(e->buf);
  e->buf = NULL;
  e->len = e->cap = 0;
  e->open = 0;
}

static size_t item_size(const char *event, const char *detail) {
  size_t n = TLC_EVLOG_ITEM + strlen(event) + 1 + (detail != NULL ? strlen(detail) + 1 : 0);
  return (n + 7) & ~(size_t)7;
}

int tlc_evlog_item_build(uint8_t *buf, size_t cap, double tim, double srctim, uint64_t thread,
                         uint64_t obj, const char *event, const char *detail, int be) {
  size_t el = strlen(event), n = item_size(event, detail);
  if (n > TLC_EVLOG_MAX_ITEM || n > cap)
    return TLC_ERANGE;
  memset(buf, 0, n);
  wrf64(buf, tim, be);
  wrf64(buf + 8, srctim, be);
  wr_n(buf + 16, thread, 8, be);
  wr_n(buf + 24, obj, 8, be);
  wr_n(buf + 32, TLC_EVLOG_ITEM, 2, be);
  wr_n(buf + 34, detail != NULL ? TLC_EVLOG_ITEM + el + 1 : 0, 2, be);
  wr_n(buf + 36, n, 2, be);
  memcpy(buf + TLC_EVLOG_ITEM, event, el + 1);
  if (detail != NULL)
    memcpy(buf + TLC_EVLOG_ITEM + el + 1, detail, strlen(detail) + 1);
  return (int)n;
}

int tlc_evlog_enc_flush(tlc_evlog_enc_t *e, tlc_out_t *o) {
  uint8_t h[TLC_EVLOG_HEADER];
  if (!e->open)
    return o->err;
  wr_n(h, TLC_EVLOG_MAGIC, 4, e->magic_be);
  wr_n(h + 4, e->len, 4, e->sizes_be);
  wr_n(h + 8, e->overflow, 4, e->sizes_be);
  tlc_out_write(o, h, sizeof(h));
  tlc_out_write(o, e->buf, e->len);
  e->blocks++;
  e->open = 0;
  e->len = 0;
  return o->err;
}

/* Room for n more bytes in the block buffer (n + len <= max_block checked by the caller). */
static int reserve(tlc_evlog_enc_t *e, size_t n) {
  size_t cap = e->cap != 0 ? e->cap : 4096;
  uint8_t *nb;
  if (e->len + n <= e->cap)
    return 0;
  while (cap < e->len + n)
    cap *= 2;
  if (cap > e->opts.max_block)
    cap = e->opts.max_block;
  nb = tlc_realloc(e->buf, cap);
  if (nb == NULL)
    return TLC_ENOMEM;
  e->buf = nb;
  e->cap = cap;
  return 0;
}

int tlc_evlog_enc_add(tlc_evlog_enc_t *e, const tlc_event_t *ev, tlc_out_t *o) {
  const tlc_evlog_ext_t *x = ev->evlog;
  size_t n;
  int rc;
  if (x == NULL)
    return TLC_EINVAL;
  n = x->item != NULL ? x->item_len : item_size(x->event, x->detail);
  if (n > TLC_EVLOG_MAX_ITEM || n > e->opts.max_block)
    return TLC_ERANGE;
  if (e->open && (!e->recorded || e->seq != x->block_seq || e->len + n > e->opts.max_block)) {
    if ((rc = tlc_evlog_enc_flush(e, o)) < 0)
      return rc;
  }
  if ((rc = reserve(e, n)) < 0)
    return rc;
  if (!e->open) {
    /* A recorded block split by max_block keeps its overflow count on its first part. */
    int cont = e->recorded && e->blocks > 0 && e->seq == x->block_seq;
    e->open = 1;
    e->recorded = 1;
    e->seq = x->block_seq;
    e->overflow = cont ? 0 : x->block_overflow;
    e->magic_be = x->header_be;
    e->sizes_be = x->sizes_be;
  }
  if (x->item != NULL)
    memcpy(e->buf + e->len, x->item, n);
  else
    tlc_evlog_item_build(e->buf + e->len, n, x->tim, x->srctim, ev->thread, x->obj, x->event,
                         x->detail, x->item_be);
  e->len += n;
  e->items++;
  return o->err;
}

int tlc_evlog_enc_add_item(tlc_evlog_enc_t *e, double tim, double srctim, uint64_t thread,
                           uint64_t obj, const char *event, const char *detail, tlc_out_t *o) {
  size_t n = item_size(event, detail);
  int rc;
  if (n > TLC_EVLOG_MAX_ITEM || n > e->opts.max_block)
    return TLC_ERANGE;
  if (e->open && (e->recorded || e->len + n > e->opts.max_block)) {
    if ((rc = tlc_evlog_enc_flush(e, o)) < 0)
      return rc;
  }
  if ((rc = reserve(e, n)) < 0)
    return rc;
  if (!e->open) {
    e->open = 1;
    e->recorded = 0;
    e->overflow = 0;
    e->magic_be = e->sizes_be = e->opts.header_be;
  }
  tlc_evlog_item_build(e->buf + e->len, n, tim, srctim, thread, obj, event, detail,
                       e->opts.item_be);
  e->len += n;
  e->items++;
  return o->err;
}
