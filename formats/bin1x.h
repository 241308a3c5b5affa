/* bin1x.h - winIDEA binary timeline records, versions 1.0 (bin10) and 1.1 (bin11).
 *
 * Decoding goes through dec.h (tlc_dec_*); this header holds the bin1x decoder state that
 * dec.h embeds, the module entry points dec.c dispatches to, and the encoder.
 */
#ifndef TLC_BIN1X_H
#define TLC_BIN1X_H

#include "tlc_event.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_BIN1X_RECORD 24
#define TLC_BIN1X_MAX_CONFIRM 16

struct tlc_dec;

/* Decoder state (embedded in tlc_dec_t; private to bin1x.c). */
typedef struct tlc_bin1x_state {
  uint8_t carry[TLC_BIN1X_RECORD * (TLC_BIN1X_MAX_CONFIRM + 2)];
  size_t carry_len;
} tlc_bin1x_state_t;

/* Module entry points for dec.c; same contracts as the tlc_dec_* functions. */
int tlc__bin1x_init(struct tlc_dec *d);
int tlc__bin1x_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used,
                    tlc_event_t *ev, size_t max);
int tlc__bin1x_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max);
void tlc__bin1x_reset(struct tlc_dec *d);

/* Encodes one event as a 24-byte record of format `f` (TLC_FMT_BIN10 or TLC_FMT_BIN11). */
void tlc_bin1x_encode(tlc_format_t f, const tlc_event_t *ev, uint8_t out[TLC_BIN1X_RECORD]);

/* How many consecutive structurally plausible records start at buf (for format detection). */
size_t tlc_bin1x_plausible_run(tlc_format_t f, const uint8_t *buf, size_t len);

#endif
