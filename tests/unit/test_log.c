/* test_log.c - the log's rate limit and its "suppressed" summary lines.
 *
 * stderr is pointed at a temporary file; a call site that logs more than TLC_LOG_BURST lines
 * within TLC_LOG_INTERVAL_MS has the rest suppressed and summarised by tlc_log_flush(). The
 * summary quotes the format of an ordinary site and, for lines passed through as "%s" (the
 * pubsub and storage modules' messages), the last suppressed text itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *capture(void (*fn)(void)) {
  char path[] = "/tmp/tlc_test_log_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  static char text[65536];
  ssize_t n;
  assert_true(fd >= 0 && saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  tlc_log_init();
  fn();
  tlc_log_flush(1);
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  n = pread(fd, text, sizeof(text) - 1, 0);
  assert_true(n >= 0);
  text[n] = '\0';
  close(fd);
  unlink(path);
  return text;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
    n++;
  return n;
}

static void passthrough(void) {
  char msg[64];
  for (int i = 0; i < TLC_LOG_BURST + 5; i++) {
    snprintf(msg, sizeof(msg), "segment %d: disk full", i);
    tlc_log(TLC_LOG_WARN, TLC_LOGC_STORE, "%s", msg);
  }
}

static void ordinary(void) {
  for (int i = 0; i < TLC_LOG_BURST + 2; i++)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "connection %d closed", i);
}

static void test_passthrough_summary_names_the_message(void **state) {
  const char *t;
  (void)state;
  t = capture(passthrough);
  assert_int_equal(count(t, "store: segment "),
                   TLC_LOG_BURST); /* the summary says "store: suppressed" */
  assert_non_null(strstr(t, "suppressed 5 messages like: segment 14: disk full"));
  assert_null(strstr(t, "like: %s"));
}

static void test_ordinary_summary_names_the_format(void **state) {
  const char *t;
  (void)state;
  t = capture(ordinary);
  assert_int_equal(count(t, "tcp: connection "), TLC_LOG_BURST);
  assert_non_null(strstr(t, "suppressed 2 messages like: connection %d closed"));
}

/* Store info lines (retention deleting segments, say) past the burst, then pubsub info lines
 * and a store warning, all passed through as "%s": each (component, level) has its own burst and
 * summary, so the pubsub lines and the warning are all written, and the store's summary says
 * "info store:", not another module's tag or level. */
static void shared_format(void) {
  char msg[64];
  for (int i = 0; i < TLC_LOG_BURST + 7; i++) {
    snprintf(msg, sizeof(msg), "retention: deleted segment %d", i);
    tlc_log(TLC_LOG_INFO, TLC_LOGC_STORE, "%s", msg);
  }
  for (int i = 0; i < 3; i++) {
    snprintf(msg, sizeof(msg), "sub#%d disconnected", i);
    tlc_log(TLC_LOG_INFO, TLC_LOGC_PUBSUB, "%s", msg);
  }
  tlc_log(TLC_LOG_WARN, TLC_LOGC_STORE, "%s", "writer stalled: disk full");
}

static void test_passthrough_sites_per_module_and_level(void **state) {
  const char *t;
  (void)state;
  t = capture(shared_format);
  assert_int_equal(count(t, "store: retention: deleted segment "), TLC_LOG_BURST);
  assert_int_equal(count(t, "pubsub: sub#"), 3);
  assert_int_equal(count(t, "warn store: writer stalled: disk full"), 1);
  assert_int_equal(count(t, "suppressed"), 1);
  assert_non_null(
      strstr(t, "info store: suppressed 7 messages like: retention: deleted segment 16"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_passthrough_summary_names_the_message),
    cmocka_unit_test(test_ordinary_summary_names_the_format),
    cmocka_unit_test(test_passthrough_sites_per_module_and_level),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
