/* fuzz_alert.c - libFuzzer harness for daemon/alert's readers of outside bytes: the
 * Alertmanager's answer head (tlc_alert_parse_answer, fed as the request thread feeds it: the
 * bytes so far, growing) and the alertmanager_url a configuration gives (tlc_alert_parse_url).
 *
 * Checks: the answer's verdict on a prefix never contradicts the verdict on the whole (a head
 * complete in a prefix is complete, with the same status, in every longer input; a refusal
 * stays a refusal), a status is three digits of at least 100; a URL taken has a NUL-terminated
 * host without space or control character, a port 1..65535, and a prefix that is "" or starts
 * with '/' and does not end with one.
 */
#include "alert/alert.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void answer(const char *buf, size_t n) {
  int done = 0, refused = 0, status0 = 0;
  for (size_t k = 0; k <= n; k++) {
    int st = -1;
    int r = tlc_alert_parse_answer(buf, k, &st);
    if (refused && r != -1)
      abort(); /* a refusal is final */
    if (done && (r != 1 || st != status0))
      abort(); /* a complete head stays complete */
    if (r == 1) {
      if (st < 100 || st > 999)
        abort();
      if (!done)
        status0 = st;
      done = 1;
    } else if (r == -1) {
      refused = 1;
    } else if (r != 0) {
      abort();
    }
  }
}

static void url(const char *s) {
  tlc_alert_url_t u;
  char why[300];
  unsigned long port;
  size_t n;
  if (tlc_alert_parse_url(s, &u, why, sizeof(why)) != 0) {
    if (strnlen(why, sizeof(why)) == sizeof(why) || why[0] == '\0')
      abort();
    return;
  }
  n = strnlen(u.host, sizeof(u.host));
  if (n == 0 || n == sizeof(u.host))
    abort();
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)u.host[i] <= ' ' || u.host[i] == 0x7f)
      abort();
  port = strtoul(u.port, NULL, 10);
  if (port == 0 || port > 65535)
    abort();
  n = strnlen(u.prefix, sizeof(u.prefix));
  if (n == sizeof(u.prefix) || (n > 0 && (u.prefix[0] != '/' || u.prefix[n - 1] == '/')))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s;
  if (size > 16384)
    return 0;
  s = malloc(size + 1);
  if (s == NULL)
    return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  answer(s, size);
  url(s);
  free(s);
  return 0;
}
