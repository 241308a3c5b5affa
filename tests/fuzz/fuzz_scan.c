/* fuzz_scan.c - libFuzzer harness for the record/block scanner (formats/scan.c).
 *
 * Input: one byte choosing the format (bin10, bin11, evlog) and max_block, then the bytes.
 * Walks the input record by record and checks: no read past the input (ASan); a result in
 * {-1, 0, 1}; a record is at least one header long, fits in the bytes, and holds no more items
 * than 40-byte heads fit; its times are in order when it has timed items; it is
 * self-contained (the same answer from exactly its bytes) and not found in fewer bytes (one byte
 * less asks for more); "more" names a length beyond what was given. Where the strict decoder
 * accepts the whole input, the scanner walks it to the end, finding as many evlog items as
 * the decoder handed out (the decoder's rule for sizes, formats/evlog.c).
 */
#include "formats/dec.h"
#include "formats/scan.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tlc_format_t fmts[3] = { TLC_FMT_BIN10, TLC_FMT_BIN11, TLC_FMT_EVLOG };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  tlc_format_t f = fmts[data[0] % 3];
  uint32_t max_block = (data[0] & 0x80) ? 4096 : 0;
  data++;
  size--;
  size_t pos = 0;
  uint64_t items = 0;
  int whole = 1;
  while (pos < size) {
    tlc_scan_rec_t r, r2;
    size_t need = 0, need2 = 0;
    int rc = tlc_scan_record(f, data + pos, size - pos, max_block, &r, &need);
    if (rc < -1 || rc > 1)
      abort();
    if (rc == 0 && need != 0 && need <= size - pos)
      abort();
    if (rc != 1) {
      whole = 0;
      break;
    }
    size_t hdr = f == TLC_FMT_EVLOG ? 12 : 24;
    if (r.len < hdr || r.len > size - pos)
      abort();
    if (f == TLC_FMT_EVLOG && (uint64_t)r.items * 40 > r.len - 12)
      abort();
    if (f != TLC_FMT_EVLOG && (r.len != 24 || r.items != 1))
      abort();
    if (r.tmin != INT64_MAX && r.tmin > r.tmax)
      abort();
    if (tlc_scan_record(f, data + pos, r.len, max_block, &r2, &need2) != 1 || r2.len != r.len ||
        r2.tmin != r.tmin || r2.tmax != r.tmax || r2.items != r.items)
      abort();
    if (tlc_scan_record(f, data + pos, r.len - 1, max_block, &r2, &need2) != 0)
      abort();
    items += r.items;
    pos += r.len;
  }
  /* the strict decoder over the same bytes */
  tlc_dec_t d;
  tlc_dec_opts_t o = { .max_block = max_block };
  if (tlc_dec_init(&d, f, &o) != 0)
    return 0;
  static tlc_event_t ev[256];
  uint64_t dec_items = 0;
  size_t at = 0;
  int ok = 1;
  while (at < size) {
    size_t used = 0;
    int n = tlc_dec_push(&d, data + at, size - at, &used, ev, 256);
    if (n < 0 || d.err != 0) {
      ok = 0;
      break;
    }
    dec_items += (uint64_t)n;
    at += used;
  }
  if (ok) {
    int n;
    while ((n = tlc_dec_finish(&d, ev, 256)) > 0)
      dec_items += (uint64_t)n;
    if (n < 0)
      ok = 0;
  }
  tlc_dec_fini(&d);
  if (ok && (!whole || items != dec_items))
    abort(); /* a stream the decoder takes whole is framed alike by the scanner */
  return 0;
}
