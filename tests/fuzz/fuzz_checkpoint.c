/* fuzz_checkpoint.c - libFuzzer harness for the checkpoint reader (daemon/continuity/ckfile.c,
 * with daemon/engine/checkpoint.c, hist.c and formats/evmap.c behind it).
 *
 * Input: a whole checkpoint file. It is tried twice: as it is (the integrity checks: length,
 * magic, version, byte order, checksum), and with its payload length and checksum fixed up, so
 * that mutations reach every field of the target section, the engine's rows, contexts, stacks,
 * histograms, window buckets and hash entries, and the evlog mapping. When the target section
 * reads, a target is created with the settings it names (mapping file left out) and restored;
 * then, restored or refused, the target takes a few records and is snapshot, and freed.
 *
 * Checked: no crash, UB, leak or hang (ASan/UBSan/LSan); a refused restore leaves the target
 * empty (no event counted before the records fed here).
 */
#include "base/alloc.h"
#include "continuity/ckfile.h"
#include "engine/engine.h"
#include "formats/stats.h"
#include "ingest/target.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void exercise(tlc_target_t *t) {
  uint8_t rec[24 * 4];
  tlc_table_t tab;
  memset(rec, 0, sizeof rec);
  if (t->format != TLC_FMT_EVLOG) {
    for (unsigned i = 0; i < 4; i++) {
      uint32_t flags = (i & 1) ? 0u : 3u; /* E then X */
      int64_t time = (int64_t)1000 + i;
      memcpy(rec + 24 * i + 4, &flags, 4);
      memcpy(rec + 24 * i + 16, &time, 8);
    }
    (void)tlc_target_feed(t, rec, sizeof rec);
  }
  tlc_table_init(&tab);
  (void)tlc_target_snapshot(t, &tab, NULL);
  tlc_table_fini(&tab);
}

static void one(const uint8_t *data, size_t size) {
  tlc_ckpt_info_t info;
  tlc_targets_t reg;
  tlc_target_t *t = NULL;
  char why[200];
  if (tlc_ckpt_check(data, size, &info, why, sizeof why) != 0)
    return;
  info.conf.mapping_path = NULL; /* no file is read; caps allocate nothing up front */
  tlc_targets_init(&reg, 4);
  if (tlc_targets_get(&reg, info.name, info.src_kind, &info.conf, &t) == 0 && t != NULL) {
    if (tlc_ckpt_restore(t, data, size, why, sizeof why) != 0 &&
        tlc_engine_counters(t->pipe.engine)->events != 0)
      abort(); /* a refused restore must leave the target empty */
    exercise(t);
  }
  tlc_targets_fini(&reg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy;
  uint64_t plen, sum;
  one(data, size);
  if (size < TLC_CKPT_HEADER + 8)
    return 0;
  copy = malloc(size);
  if (copy == NULL)
    return 0;
  memcpy(copy, data, size);
  plen = size - TLC_CKPT_HEADER - 8;
  memcpy(copy + 64, &plen, 8);
  sum = tlc_ck_fnv(copy, size - 8);
  memcpy(copy + size - 8, &sum, 8);
  one(copy, size);
  free(copy);
  return 0;
}
