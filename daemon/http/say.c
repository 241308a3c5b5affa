/* say.c - the log line every libwebsockets file of daemon/http writes through the options'
 * hook (server-int.h). A leaf: it calls none of the others.
 * Loop thread only.
 */
#include "http/server-int.h"

#include <stdarg.h>
#include <stdio.h>

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
