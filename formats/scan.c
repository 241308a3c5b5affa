/* scan.c - record/block framing of stored streams: where each bin1x record or evlog block ends,
 * how many events it holds and its smallest and largest time, without decoding events.
 *
 * Used to index files (storage manifests when a segment is rebuilt or recovered, range reads):
 * the one place outside the decoders that knows the framing, and it asks evlog.c for the rules
 * the decoder applies (size plausibility, an item's index time).
 *
 *   bin1x   24-byte records; time: bytes 16..23, little-endian (bin1x.c's layout)
 *   evlog   12-byte header (magic, size, overflow) + `size` bytes of items, 40-byte item heads
 *           chained by event_next (evlog.c's layout)
 *
 * Byte orders of an evlog header: the magic gives the header's order; the size is read in that
 * order unless it is implausible there (tlc_evlog_size_ok: the decoder's rule) and plausible in
 * the other. Where both readings are plausible the decoder goes by the order an earlier header
 * of its stream taught it; a scanner looks at one block at a time (an index jumps into the
 * middle of a file), so it follows the chain of items (event_next from item to item) to the
 * nearer of the two ends: landing on it takes that reading, passing it the other; for blocks
 * whose chain ends at the block's end (every block tlcapd writes), the true size.
 *
 * Pure: no I/O, no allocation; any thread. Cost: O(items) per evlog block, O(1) per record.
 */
#include "formats/scan.h"

#include "formats/evlog.h"

#include <math.h>
#include <string.h>

static uint32_t rd32(const uint8_t *p, int be) {
  return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
            : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}
static uint16_t rd16(const uint8_t *p, int be) {
  return be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}
static uint64_t rd64(const uint8_t *p, int be) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[be ? 7 - i : i] << (8 * i);
  return v;
}

int tlc_scan_record(tlc_format_t f, const uint8_t *buf, size_t len, uint32_t max_block,
                    tlc_scan_rec_t *r, size_t *need) {
  if (f == TLC_FMT_BIN10 || f == TLC_FMT_BIN11) {
    if (len < 24) {
      *need = 24;
      return 0;
    }
    r->len = 24;
    r->tmin = r->tmax = (int64_t)rd64(buf + 16, 0);
    r->items = 1;
    return 1;
  }
  if (f != TLC_FMT_EVLOG)
    return -1;
  if (max_block == 0)
    max_block = TLC_SCAN_MAX_BLOCK;
  if (len < 12) {
    *need = 12;
    return 0;
  }
  int hbe;
  if (rd32(buf, 0) == 0x0ffee211u)
    hbe = 0;
  else if (rd32(buf, 1) == 0x0ffee211u)
    hbe = 1;
  else
    return -1;
  /* The size word may be in either order (efl_debug writes the magic in its host's order and
   * the sizes in either). When both readings are plausible, the right one is where the chain
   * of items (event_next) ends. */
  uint32_t sa = rd32(buf + 4, hbe), sb = rd32(buf + 4, !hbe), size;
  int va = tlc_evlog_size_ok(sa, max_block), vb = tlc_evlog_size_ok(sb, max_block) && sb != sa;
  if (!va && !vb)
    return -1;
  if (va != vb) {
    size = va ? sa : sb;
  } else {
    /* Both readings plausible: follow the chain of items up to the nearer end. Landing on it
     * takes that reading; passing it takes the farther one; a chain that breaks first keeps
     * the magic's order (sa), as the decoder does. Only bytes before the nearer end are read,
     * so the answer never depends on what follows the block. */
    size_t p = 12, ea = 12 + (size_t)sa, eb = 12 + (size_t)sb;
    size_t en = ea < eb ? ea : eb;
    size = sa;
    for (;;) {
      if (p == en) {
        size = en == ea ? sa : sb;
        break;
      }
      if (p > en) {
        size = en == ea ? sb : sa;
        break;
      }
      if (p + 40 > en)
        break; /* no room for an item head before the nearer end: the chain cannot land */
      if (p + 40 > len) {
        *need = p + 40;
        return 0;
      }
      int ibe;
      if (rd16(buf + p + 32, 0) == 40)
        ibe = 0;
      else if (rd16(buf + p + 32, 1) == 40)
        ibe = 1;
      else
        break;
      uint16_t nx = rd16(buf + p + 36, ibe);
      if (nx < 40)
        break;
      p += nx;
    }
  }
  size_t total = 12 + (size_t)size;
  if (len < total) {
    *need = total;
    return 0;
  }
  r->len = total;
  r->tmin = INT64_MAX;
  r->tmax = INT64_MIN;
  r->items = 0;
  size_t p = 12;
  while (p + 40 <= total) {
    const uint8_t *it = buf + p;
    int ibe;
    if (rd16(it + 32, 0) == 40)
      ibe = 0;
    else if (rd16(it + 32, 1) == 40)
      ibe = 1;
    else
      break;
    uint16_t next = rd16(it + 36, ibe);
    uint64_t bits = rd64(it, ibe);
    double tim;
    memcpy(&tim, &bits, sizeof tim);
    int64_t t;
    if (tlc_evlog_index_time(tim, &t)) {
      if (t < r->tmin)
        r->tmin = t;
      if (t > r->tmax)
        r->tmax = t;
    }
    r->items++;
    if (next < 40)
      break;
    p += next;
  }
  return 1;
}
