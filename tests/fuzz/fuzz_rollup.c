/* fuzz_rollup.c - libFuzzer harness for the rollup block decoder (formats/rollup.c).
 *
 * Checks: no read past the input (ASan), no leak, a decoded block is well formed (cells strictly
 * ascending, bins ascending below TLC_ROLLUP_NB summing to each cell's count), re-encodes to the
 * very bytes it was read from (an older version's block: to one that reads back the same), and
 * merges into itself as twice its counts and violations.
 */
#include "formats/rollup.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_rollup_blk_t b, twice;
  tlc_ckw_t w;
  size_t used = 0;
  char err[160];
  tlc_rollup_blk_init(&b);
  if (tlc_rollup_decode(&b, data, size, &used, err, sizeof err) != 0) {
    if (b.n != 0)
      abort();
    tlc_rollup_blk_fini(&b);
    return 0;
  }
  if (used > size)
    abort();
  for (size_t i = 0; i < b.n; i++) {
    uint64_t tot = 0;
    if (i > 0 && tlc_rollup_key_cmp(&b.cells[i - 1].key, &b.cells[i].key) >= 0)
      abort();
    for (uint32_t j = 0; j < b.cells[i].nbins; j++) {
      if (b.cells[i].bins[j].b >= TLC_ROLLUP_NB)
        abort();
      tot += b.cells[i].bins[j].n;
    }
    if (b.cells[i].nbins > 0 && tot != b.cells[i].d.n)
      abort();
  }
  tlc_ckw_init(&w, size + 8 * b.n + 64);
  tlc_rollup_encode(&b, &w);
  if (data[4] == TLC_ROLLUP_VERSION && data[5] == 0) {
    if (w.err == 0 && (w.len != used || memcmp(w.p, data, used) != 0))
      abort();
  } else if (w.err == 0) { /* an older version: written anew, it reads back the same */
    tlc_rollup_blk_t again;
    tlc_rollup_blk_init(&again);
    if (tlc_rollup_decode(&again, w.p, w.len, NULL, err, sizeof err) == 0) {
      if (again.n != b.n)
        abort();
      for (size_t i = 0; i < b.n; i++)
        if (again.cells[i].d.n != b.cells[i].d.n ||
            again.cells[i].violations != b.cells[i].violations)
          abort();
    }
    tlc_rollup_blk_fini(&again);
  }
  tlc_ckw_fini(&w);
  tlc_rollup_blk_init(&twice);
  if (tlc_rollup_blk_merge(&twice, &b) == 0 && tlc_rollup_blk_merge(&twice, &b) == 0) {
    if (twice.n != b.n)
      abort();
    for (size_t i = 0; i < b.n; i++)
      if (twice.cells[i].d.n != 2 * b.cells[i].d.n || twice.cells[i].nbins != b.cells[i].nbins ||
          twice.cells[i].violations != 2 * b.cells[i].violations)
        abort();
  }
  tlc_rollup_blk_fini(&twice);
  tlc_rollup_blk_fini(&b);
  return 0;
}
