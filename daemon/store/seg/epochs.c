/* epochs.c - the clock epochs of stored segments (see epochs.h). */
#include "store/seg/epochs.h"

#include "store/seg/seg.h"
#include "store/seg/segread.h"

uint64_t tlc_seg_epochs(const tlc_seg_epoch_in_t *s, size_t n, int64_t threshold_ns,
                        uint64_t *epoch) {
  uint64_t e = 0;
  int64_t runmax = 0;
  int have = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0) {
      int r = s[i - 1].reason;
      int gap = r == TLC_ROT_RECONNECT || r == TLC_ROT_IDLE || r == TLC_ROT_SHUTDOWN ||
                r == TLC_ROT_RECOVERED || s[i - 1].state == TLC_SEGST_OPEN ||
                s[i - 1].state == TLC_SEGST_SEALING;
      if (r == TLC_ROT_CLOCK_RESET ||
          (gap && have && threshold_ns > 0 && s[i].records > 0 && s[i].first_time < runmax &&
           (uint64_t)runmax - (uint64_t)s[i].first_time > (uint64_t)threshold_ns)) {
        e++;
        have = 0;
      }
    }
    if (s[i].records > 0 && (!have || s[i].max_time > runmax)) {
      runmax = s[i].max_time;
      have = 1;
    }
    epoch[i] = e;
  }
  return e;
}

uint64_t tlc_seg_epoch_shift(uint64_t newest, int64_t live) {
  return live >= 0 && (uint64_t)live >= newest ? (uint64_t)live - newest : 0;
}
