/* bin1x.c - TEMPORARY: being written (bin10/bin11 codec). */
#include "dec.h"
#include "tlc_err.h"
#include <string.h>
int tlc__bin1x_init(struct tlc_dec *d) { (void)d; return 0; }
int tlc__bin1x_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev, size_t max) { (void)d; (void)in; (void)len; (void)used; (void)ev; (void)max; return TLC_EINVAL; }
int tlc__bin1x_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max) { (void)d; (void)ev; (void)max; return 0; }
void tlc__bin1x_reset(struct tlc_dec *d) { (void)d; }
void tlc_bin1x_encode(tlc_format_t f, const tlc_event_t *ev, uint8_t out[TLC_BIN1X_RECORD]) { (void)f; (void)ev; memset(out, 0, TLC_BIN1X_RECORD); }
size_t tlc_bin1x_plausible_run(tlc_format_t f, const uint8_t *buf, size_t len) { (void)f; (void)buf; (void)len; return 0; }
