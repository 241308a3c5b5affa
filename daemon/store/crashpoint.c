/* crashpoint.c - crash points for the crash tests (RELIABILITY T01, T02), compiled only into the
 * test binaries (tlcapd-test, store_driver), which install it as tlc_crashpoint_hook.
 *
 * Reads TLCAP_CRASHPOINT ("name" or "name:N") once (first call) and counts hits of the named
 * point with an atomic counter, so it works from the writer thread and libuv's workers alike;
 * the N-th hit raises SIGKILL.
 */
#include "store/seg/iofault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int cp_loaded;
static char cp_name[64];
static long cp_nth;
static atomic_long cp_hits;

void tlc_crashpoint_env(const char *name) {
  if (atomic_load(&cp_loaded) == 0) {
    const char *e = getenv("TLCAP_CRASHPOINT");
    cp_name[0] = 0;
    cp_nth = 1;
    if (e && *e) {
      const char *colon = strchr(e, ':');
      size_t n = colon ? (size_t)(colon - e) : strlen(e);
      if (n < sizeof cp_name) {
        memcpy(cp_name, e, n);
        cp_name[n] = 0;
      }
      if (colon)
        cp_nth = strtol(colon + 1, NULL, 10);
      if (cp_nth < 1)
        cp_nth = 1;
    }
    atomic_store(&cp_loaded, 1);
  }
  if (cp_name[0] == 0 || strcmp(cp_name, name) != 0)
    return;
  if (atomic_fetch_add(&cp_hits, 1) + 1 == cp_nth)
    raise(SIGKILL);
}
