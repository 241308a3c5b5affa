/* clock.h - the wall clock every layer stamps with (log lines, target connections, the HTTP
 * port, subscribers, NATS messages). */
#ifndef TLC_BASE_CLOCK_H
#define TLC_BASE_CLOCK_H

#include <stdint.h>

/* Milliseconds since the Unix epoch (CLOCK_REALTIME). Any thread. */
int64_t tlc_now_unix_ms(void);

#endif
