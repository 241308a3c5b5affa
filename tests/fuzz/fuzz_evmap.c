/* fuzz_evmap.c - libFuzzer harness for the evlog mapping behind the decoder.
 *
 * Input: byte 0 = caps selector, the rest = an evlog stream, decoded in resync mode and every
 * event mapped with small caps (names, name bytes, depth, threads), so that every limit path
 * runs. Checks: 0..2 outputs per item; the handle's type nibble is 0, 2, 3 or 4 and its name
 * is known; S and R are synthesised and only around E and X; outputs keep time, thread and
 * offset; the export into a mapping holds every area. Must never crash or leak.
 */
#include "base/alloc.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/mapping.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const tlc_evmap_t *m, const tlc_event_t *in, const tlc_event_t *out, int n) {
  int i;
  if (n < 0 || n > 2)
    abort();
  for (i = 0; i < n; i++) {
    unsigned t = tlc_handle_area(out[i].handle);
    if ((t != 0 && t != 2 && t != 3 && t != 4) || tlc_evmap_name(m, out[i].handle) == NULL)
      abort();
    if (out[i].time_ns != in->time_ns || out[i].thread != in->thread ||
        out[i].offset != in->offset || out[i].evlog != in->evlog || out[i].type > TLC_EV_WRITE)
      abort();
    if ((out[i].type == TLC_EV_SUSPEND || out[i].type == TLC_EV_RESUME) !=
        ((out[i].flags & TLC_EVF_SYNTH) != 0))
      abort();
  }
  if (n == 2 && !((out[0].type == TLC_EV_SUSPEND && out[1].type == TLC_EV_ENTRY) ||
                  (out[0].type == TLC_EV_EXIT && out[1].type == TLC_EV_RESUME)))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_dec_t d;
  tlc_dec_opts_t opts;
  tlc_evmap_opts_t mo;
  tlc_evmap_t *m;
  tlc_event_t ev[TLC_EVLOG_BATCH], out[2];
  tlc_mapping_t map;
  size_t pos = 0, used, i;
  int n, k;
  if (size < 1)
    return 0;
  memset(&mo, 0, sizeof(mo));
  mo.max_names = 1 + (data[0] & 15);
  mo.max_name_bytes = 8 + (size_t)(data[0] >> 4) * 16;
  mo.max_depth = 1 + (data[0] & 3);
  mo.max_threads = 1 + ((data[0] >> 2) & 3);
  data++;
  size--;
  memset(&opts, 0, sizeof(opts));
  opts.resync = 1;
  if (tlc_dec_init(&d, TLC_FMT_EVLOG, &opts) != 0 || tlc_evmap_new(&m, &mo) != 0)
    abort();
  for (;;) {
    if (pos < size) {
      n = tlc_dec_push(&d, data + pos, size - pos, &used, ev, TLC_EVLOG_BATCH);
      pos += used;
    } else {
      n = tlc_dec_finish(&d, ev, TLC_EVLOG_BATCH);
      if (n <= 0)
        break;
    }
    if (n < 0)
      abort(); /* resync mode never fails in push */
    for (i = 0; i < (size_t)n; i++) {
      k = tlc_evmap_map(m, &ev[i], out);
      check(m, &ev[i], out, k);
    }
  }
  tlc_mapping_init(&map);
  if (tlc_evmap_export(m, &map) != 0 || map.nareas != tlc_evmap_area_count(m) ||
      tlc_evmap_area_count(m) > mo.max_names)
    abort();
  tlc_mapping_fini(&map);
  tlc_evmap_free(m);
  tlc_dec_fini(&d);
  return 0;
}
