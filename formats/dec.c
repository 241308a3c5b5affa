/* dec.c - the format-independent face of the streaming decoders (see dec.h).
 *
 * Dispatches to bin1x.c and evlog.c, owns option defaults and validation, and guesses a
 * stream's format. Holds no state of its own.
 */
#include "formats/dec.h"

#include "base/err.h"

#include <stdio.h>
#include <string.h>

int tlc_dec_init(tlc_dec_t *d, tlc_format_t format, const tlc_dec_opts_t *opts) {
  memset(d, 0, sizeof(*d));
  if (opts != NULL)
    d->opts = *opts;
  if (d->opts.time_tolerance_ns < 0)
    return TLC_EINVAL;
  if (d->opts.time_tolerance_ns == 0)
    d->opts.time_tolerance_ns = TLC_DEC_TOLERANCE_NS;
  if (d->opts.confirm == 0)
    d->opts.confirm = 3;
  if (d->opts.confirm > TLC_BIN1X_MAX_CONFIRM)
    return TLC_EINVAL;
  if (d->opts.max_block == 0)
    d->opts.max_block = 64u << 20;
  d->format = format;
  switch (format) {
  case TLC_FMT_BIN10:
  case TLC_FMT_BIN11:
    return tlc__bin1x_init(d);
  case TLC_FMT_EVLOG:
    return tlc__evlog_init(d);
  default:
    d->format = TLC_FMT_NONE;
    return TLC_EINVAL;
  }
}

void tlc_dec_fini(tlc_dec_t *d) {
  if (d->format == TLC_FMT_EVLOG)
    tlc__evlog_fini(d);
  d->format = TLC_FMT_NONE;
}

int tlc_dec_push(tlc_dec_t *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev,
                 size_t max) {
  *used = 0;
  if (d->err)
    return d->err;
  switch (d->format) {
  case TLC_FMT_BIN10:
  case TLC_FMT_BIN11:
    return tlc__bin1x_push(d, in, len, used, ev, max);
  case TLC_FMT_EVLOG:
    return tlc__evlog_push(d, in, len, used, ev, max);
  default:
    return TLC_EINVAL;
  }
}

int tlc_dec_finish(tlc_dec_t *d, tlc_event_t *ev, size_t max) {
  if (d->err)
    return d->err;
  switch (d->format) {
  case TLC_FMT_BIN10:
  case TLC_FMT_BIN11:
    return tlc__bin1x_finish(d, ev, max);
  case TLC_FMT_EVLOG:
    return tlc__evlog_finish(d, ev, max);
  default:
    return TLC_EINVAL;
  }
}

int tlc_dec_idle(tlc_dec_t *d, tlc_event_t *ev, size_t max) {
  if (d->err || !d->opts.resync)
    return 0;
  if (d->format == TLC_FMT_BIN10 || d->format == TLC_FMT_BIN11)
    return tlc__bin1x_idle(d, ev, max);
  return 0;
}

void tlc_dec_reset(tlc_dec_t *d) {
  d->err = 0;
  d->err_offset = 0;
  d->err_reason[0] = '\0';
  switch (d->format) {
  case TLC_FMT_BIN10:
  case TLC_FMT_BIN11:
    tlc__bin1x_reset(d);
    break;
  case TLC_FMT_EVLOG:
    tlc__evlog_reset(d);
    break;
  default:
    break;
  }
}

tlc_format_t tlc_dec_detect(const uint8_t *buf, size_t len, char *why, size_t whylen) {
  size_t whole = len / TLC_BIN1X_RECORD;
  size_t r10, r11;
  if (tlc_evlog_looks_like(buf, len)) {
    snprintf(why, whylen, "evlog: block magic 0x0ffee211 at offset 0");
    return TLC_FMT_EVLOG;
  }
  if (whole == 0) {
    snprintf(why, whylen, "no format fits: %zu bytes, less than one 24-byte record", len);
    return TLC_FMT_NONE;
  }
  /* A bin11 record's flags word has its type in the low nibble and the core above it; a bin10
   * event word has the type in bits 24-27. Both readings are checked over the same prefix; the
   * longer plausible run wins, bin11 on a tie (it is the current version and an all-zero flags
   * word reads the same in both). */
  r11 = tlc_bin1x_plausible_run(TLC_FMT_BIN11, buf, len);
  r10 = tlc_bin1x_plausible_run(TLC_FMT_BIN10, buf, len);
  if (r11 == 0 && r10 == 0) {
    snprintf(why, whylen,
             "no format fits: no evlog magic and the first record is not a "
             "plausible bin10/bin11 record");
    return TLC_FMT_NONE;
  }
  if (r11 >= r10) {
    snprintf(why, whylen, "bin11: %zu of %zu records plausible (bin10: %zu)", r11, whole, r10);
    return TLC_FMT_BIN11;
  }
  snprintf(why, whylen, "bin10: %zu of %zu records plausible (bin11: %zu)", r10, whole, r11);
  return TLC_FMT_BIN10;
}

size_t tlc_dec_pending(const tlc_dec_t *d) {
  switch (d->format) {
  case TLC_FMT_BIN10:
  case TLC_FMT_BIN11:
    return d->u.bin.wlen;
  case TLC_FMT_EVLOG:
    if (d->u.ev.phase == 1)
      return d->u.ev.block_left > 0 ? d->u.ev.block_left : 1;
    return d->u.ev.carry_len - d->u.ev.carry_off;
  default:
    return 0;
  }
}
