/* evlog.h - EFL Eina evlog blocks (efl_debug's capture files and live streams).
 *
 * Decoding goes through dec.h (tlc_dec_*); this header holds the evlog decoder state that
 * dec.h embeds, the module entry points dec.c dispatches to, and the encoder.
 */
#ifndef TLC_EVLOG_H
#define TLC_EVLOG_H

#include "tlc_event.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_EVLOG_MAGIC 0x0ffee211u
#define TLC_EVLOG_HEADER 12
#define TLC_EVLOG_ITEM 40

struct tlc_dec;

/* Decoder state (embedded in tlc_dec_t; private to evlog.c). */
typedef struct tlc_evlog_state {
  uint8_t *carry;
  size_t carry_len;
  size_t carry_cap;
} tlc_evlog_state_t;

/* Module entry points for dec.c; same contracts as the tlc_dec_* functions. */
int tlc__evlog_init(struct tlc_dec *d);
void tlc__evlog_fini(struct tlc_dec *d);
int tlc__evlog_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used,
                    tlc_event_t *ev, size_t max);
int tlc__evlog_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max);
void tlc__evlog_reset(struct tlc_dec *d);

/* 1 if buf starts with a block header whose magic reads in either byte order. */
int tlc_evlog_looks_like(const uint8_t *buf, size_t len);

#endif
