/* clock.c - the wall clock (see clock.h). */
#include "base/clock.h"

#include <time.h>

int64_t tlc_now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
