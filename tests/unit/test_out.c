/* test_out.c - the bounded output buffer: number formatting, caps, sticky errors, flushing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "testalloc.h"

#include <stdio.h>
#include <string.h>

static char *take(tlc_out_t *o) {
  size_t len;
  return tlc_out_take(o, &len);
}

static void test_numbers(void **state) {
  tlc_out_t o;
  char *s;
  (void)state;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_out_u64(&o, 0);
  tlc_out_putc(&o, ' ');
  tlc_out_u64(&o, 18446744073709551615ull);
  tlc_out_putc(&o, ' ');
  tlc_out_i64(&o, INT64_MIN);
  tlc_out_putc(&o, ' ');
  tlc_out_i64(&o, -42);
  tlc_out_putc(&o, ' ');
  tlc_out_hex(&o, 0x30000000u, 8);
  tlc_out_putc(&o, ' ');
  tlc_out_hex(&o, 5, 8);
  tlc_out_putc(&o, ' ');
  tlc_out_hex(&o, 0xABCu, 0);
  tlc_out_putc(&o, ' ');
  tlc_out_hex(&o, 0, 0);
  s = take(&o);
  assert_string_equal(s, "0 18446744073709551615 -9223372036854775808 -42 30000000 00000005 ABC 0");
  tlc_free(s);
  assert_int_equal(tlc_out_fini(&o), 0);
}

static void test_memory_cap(void **state) {
  tlc_out_t o;
  (void)state;
  tlc_out_init(&o, 10, NULL, NULL);
  tlc_out_puts(&o, "0123456789");
  assert_int_equal(o.err, 0);
  tlc_out_putc(&o, 'x');
  assert_int_equal(o.err, TLC_ELIMIT);
  tlc_out_puts(&o, "more");
  assert_null(tlc_out_take(&o, NULL));
  assert_int_equal(tlc_out_fini(&o), TLC_ELIMIT);
}

struct sink {
  char data[100000];
  size_t len;
  int calls;
  int fail_after;
};

static int sink_write(void *ud, const void *buf, size_t len) {
  struct sink *k = ud;
  k->calls++;
  if (k->fail_after && k->calls > k->fail_after)
    return TLC_EIO;
  assert_true(k->len + len <= sizeof(k->data));
  memcpy(k->data + k->len, buf, len);
  k->len += len;
  return 0;
}

static void test_callback_flush(void **state) {
  static struct sink k;
  tlc_out_t o;
  int i;
  char expect[100000];
  size_t elen = 0;
  (void)state;
  memset(&k, 0, sizeof(k));
  tlc_out_init(&o, 64, sink_write, &k);
  for (i = 0; i < 1000; i++) {
    tlc_out_printf(&o, "line %d,", i);
    elen += (size_t)snprintf(expect + elen, sizeof(expect) - elen, "line %d,", i);
  }
  assert_int_equal(tlc_out_fini(&o), 0);
  assert_int_equal(k.len, elen);
  assert_memory_equal(k.data, expect, elen);
  assert_true(k.calls > 10); /* flushed as it went, not once at the end */
}

static void test_sticky_callback_error(void **state) {
  static struct sink k;
  tlc_out_t o;
  int i;
  (void)state;
  memset(&k, 0, sizeof(k));
  k.fail_after = 2;
  tlc_out_init(&o, 16, sink_write, &k);
  for (i = 0; i < 100; i++)
    tlc_out_puts(&o, "0123456789");
  assert_int_equal(tlc_out_fini(&o), TLC_EIO);
  assert_int_equal(k.calls, 3); /* stopped calling after the first failure */
}

static void test_alloc_failure_and_leaks(void **state) {
  uint64_t n, k;
  (void)state;
  testalloc_install();
  {
    tlc_out_t o;
    tlc_out_init(&o, 0, NULL, NULL);
    for (int i = 0; i < 2000; i++)
      tlc_out_printf(&o, "%d", i);
    tlc_out_fini(&o);
  }
  n = testalloc_count();
  assert_true(n > 1);
  for (k = 1; k <= n; k++) {
    tlc_out_t o;
    testalloc_fail_at(k);
    tlc_out_init(&o, 0, NULL, NULL);
    for (int i = 0; i < 2000; i++)
      tlc_out_printf(&o, "%d", i);
    assert_int_equal(o.err, TLC_ENOMEM);
    assert_int_equal(tlc_out_fini(&o), TLC_ENOMEM);
    assert_int_equal(testalloc_live_bytes(), 0);
  }
  testalloc_uninstall();
}

static void test_strerror(void **state) {
  (void)state;
  assert_int_equal(TLC_EFRAME, -20001);
  assert_string_equal(tlc_strerror(TLC_ETRUNC), "truncated record at end of input");
  assert_string_equal(tlc_err_name(TLC_EFRAME), "TLC_EFRAME");
  assert_string_equal(tlc_strerror(12345), "unknown error");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_numbers),
    cmocka_unit_test(test_memory_cap),
    cmocka_unit_test(test_callback_flush),
    cmocka_unit_test(test_sticky_callback_error),
    cmocka_unit_test(test_alloc_failure_and_leaks),
    cmocka_unit_test(test_strerror),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
