/* evlog.c - TEMPORARY: being written (evlog codec). */
#include "dec.h"
#include "tlc_err.h"
int tlc__evlog_init(struct tlc_dec *d) { (void)d; return 0; }
void tlc__evlog_fini(struct tlc_dec *d) { (void)d; }
int tlc__evlog_push(struct tlc_dec *d, const uint8_t *in, size_t len, size_t *used, tlc_event_t *ev, size_t max) { (void)d; (void)in; (void)len; (void)used; (void)ev; (void)max; return TLC_EINVAL; }
int tlc__evlog_finish(struct tlc_dec *d, tlc_event_t *ev, size_t max) { (void)d; (void)ev; (void)max; return 0; }
void tlc__evlog_reset(struct tlc_dec *d) { (void)d; }
int tlc_evlog_looks_like(const uint8_t *buf, size_t len) { (void)buf; (void)len; return 0; }
