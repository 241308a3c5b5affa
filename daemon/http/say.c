/* say.c - the two utilities every libwebsockets file of daemon/http uses (server-int.h): a log
 * line through the options' hook and the wall clock. A leaf: it calls none of the others.
 * Loop thread only.
 */
#include "http/server-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void tlc__http_say(tlc_http_t *h, int level, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  if (h->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  h->o.log(h->o.log_ud, level, msg);
}

int64_t tlc__http_now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
