/* epochs.h - which clock epoch each of a target's stored segments belongs to (SPEC 2 and 10;
 * docs/board-resets.md): the rule `tlcap segments` shows and history addresses (`epoch:K:N`).
 *
 * Segments are taken oldest first. A new epoch starts after a segment sealed for a clock reset
 * (TLC_ROT_CLOCK_RESET), and after one that ended at a gap (reconnect, idle seal, shutdown,
 * recovery, or one still open or sealing) when the next one starts more than `threshold_ns`
 * below the latest time of the epoch so far, as the engine decides a restart after a gap.
 * Epochs are numbered from 0 at the oldest listed segment; a caller that knows the live
 * target's epoch (its clock_resets) shifts them so that the newest is that one. Pure; any
 * thread.
 */
#ifndef TLC_SEG_EPOCHS_H
#define TLC_SEG_EPOCHS_H

#include <stddef.h>
#include <stdint.h>

/* What the rule reads of one segment (its manifest's figures). */
typedef struct tlc_seg_epoch_in {
  int reason;         /* why it was sealed (enum tlc_store_reason; 0 while open) */
  int state;          /* enum tlc_seg_state */
  uint64_t records;   /* 0: no time in it */
  int64_t first_time; /* its first record's time */
  int64_t max_time;   /* its latest record's time */
} tlc_seg_epoch_in_t;

/* The epoch of each of s[0..n) into epoch[0..n), from 0 (threshold_ns <= 0: only clock-reset
 * seals start one, as clock_reset_threshold = 0 makes the engine see no restart). Returns the
 * newest one's (0 when n is 0). */
uint64_t tlc_seg_epochs(const tlc_seg_epoch_in_t *s, size_t n, int64_t threshold_ns,
                        uint64_t *epoch);

/* The shift that numbers epochs 0..newest so that the newest is `live` (the live target's
 * clock_resets; < 0: not live): live - newest when that is not negative, else 0. */
uint64_t tlc_seg_epoch_shift(uint64_t newest, int64_t live);

#endif
