/* test_auth.c - the token file rules, the check and its per-peer delays (daemon/auth/auth.h),
 * and the TLS module's memory-BIO sessions fed garbage (daemon/auth/tls.h).
 *
 * Files live in a fresh temporary directory; the expected delays are derived from the rule in
 * auth.h (first delay, doubled per failure within the window, capped), not from the code. */
#include "auth/auth.h"
#include "auth/peers.h"
#include "auth/tls.h"

#include "base/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char g_dir[256];

static const char *put(const char *name, const char *content, mode_t mode) {
  static char path[512];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  unlink(path);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
  return path;
}

static void test_file_rules(void **state) {
  char err[600];
  (void)state;
  assert_int_equal(tlc_auth_check_file(put("ok", "secret\n", 0600), err, sizeof(err)), 0);
  assert_int_equal(tlc_auth_check_file(put("ok2", "secret", 0400), err, sizeof(err)), 0);
  assert_int_equal(tlc_auth_check_file(put("g", "secret\n", 0640), err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "readable by group or others"));
  assert_int_equal(tlc_auth_check_file(put("o", "secret\n", 0604), err, sizeof(err)), TLC_EINVAL);
  assert_int_equal(tlc_auth_check_file(put("e", "", 0600), err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "empty"));
  assert_int_equal(tlc_auth_check_file(put("nl", "\nsecret\n", 0600), err, sizeof(err)),
                   TLC_EINVAL);
  assert_true(tlc_auth_check_file("/nonexistent/tok", err, sizeof(err)) < 0);
  assert_non_null(strstr(err, "/nonexistent/tok"));
  assert_int_equal(tlc_auth_check_file(g_dir, err, sizeof(err)), TLC_EINVAL); /* a directory */
  {
    char big[TLC_AUTH_MAX_TOKEN + 10];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    assert_int_equal(tlc_auth_check_file(put("big", big, 0600), err, sizeof(err)), TLC_EINVAL);
  }
}

static void test_check(void **state) {
  char err[600];
  tlc_auth_t *a;
  uint64_t delay = 99;
  tlc_auth_stats_t st;
  (void)state;
  assert_int_equal(
      tlc_auth_new(put("t", "s3cret\r\nsecond line ignored\n", 0600), NULL, &a, err, sizeof(err)),
      0);
  assert_int_equal(tlc_auth_check(a, "192.0.2.1", "s3cret", 6, 1000, &delay), 1);
  assert_int_equal(delay, 0);
  /* shorter, longer, different, empty, with the newline */
  assert_int_equal(tlc_auth_check(a, NULL, "s3cre", 5, 1000, NULL), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "s3cret!", 7, 1000, NULL), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "S3cret", 6, 1000, NULL), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "", 0, 1000, NULL), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "s3cret\r", 7, 1000, NULL), 0);
  tlc_auth_get_stats(a, &st);
  assert_int_equal(st.ok, 1);
  assert_int_equal(st.failed, 5);
  /* reload: the new token applies, the old one no longer does */
  put("t", "rotated\n", 0600);
  assert_int_equal(tlc_auth_reload(a, err, sizeof(err)), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "s3cret", 6, 1000, NULL), 0);
  assert_int_equal(tlc_auth_check(a, NULL, "rotated", 7, 1000, NULL), 1);
  /* a reload that fails keeps the running token */
  put("t", "rotated-again\n", 0644);
  assert_int_equal(tlc_auth_reload(a, err, sizeof(err)), TLC_EINVAL);
  assert_int_equal(tlc_auth_check(a, NULL, "rotated", 7, 1000, NULL), 1);
  tlc_auth_free(a);
}

static void test_delays(void **state) {
  char err[600];
  tlc_auth_t *a;
  tlc_auth_opts_t o = {
    .fail_delay_ms = 100, .fail_delay_max_ms = 700, .fail_window_ms = 5000, .max_peers = 2
  };
  uint64_t d, want = 100;
  int i;
  (void)state;
  assert_int_equal(tlc_auth_new(put("t2", "tok\n", 0600), &o, &a, err, sizeof(err)), 0);
  /* one address: 100, 200, 400, then capped at 700 */
  for (i = 0; i < 6; i++) {
    assert_int_equal(tlc_auth_check(a, "10.0.0.1", "x", 1, 1000 + (uint64_t)i, &d), 0);
    assert_int_equal(d, want < 700 ? want : 700);
    want *= 2;
  }
  /* another address starts at the first delay */
  assert_int_equal(tlc_auth_check(a, "10.0.0.2", "x", 1, 2000, &d), 0);
  assert_int_equal(d, 100);
  /* past the window, the first address is forgotten */
  assert_int_equal(tlc_auth_check(a, "10.0.0.1", "x", 1, 1005 + 5001, &d), 0);
  assert_int_equal(d, 100);
  /* a full table (2 peers) forgets the stalest: 10.0.0.2 (last failure 2000) */
  assert_int_equal(tlc_auth_check(a, "10.0.0.3", "x", 1, 6100, &d), 0);
  assert_int_equal(tlc_auth_check(a, "10.0.0.2", "x", 1, 6200, &d), 0);
  assert_int_equal(d, 100);
  /* a success does not need a delay and does not touch the table */
  assert_int_equal(tlc_auth_check(a, "10.0.0.3", "tok", 3, 6300, &d), 1);
  assert_int_equal(d, 0);
  tlc_auth_free(a);
}

/* A server session fed garbage fails its handshake; fed nothing, it waits. */
static void test_tls_garbage(void **state) {
  char err[600], why[600];
  tlc_tls_t *t;
  tlc_tls_conn_t *c;
  uint8_t junk[4096];
  char cmd[1400];
  size_t i;
  (void)state;
  snprintf(cmd, sizeof(cmd),
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
           "%s/k.pem -out %s/c.pem -days 1 -subj /CN=t >/dev/null 2>&1",
           g_dir, g_dir);
  if (system(cmd) != 0) {
    skip(); /* no openssl command: the integration tests say so too */
  }
  snprintf(cmd, sizeof(cmd), "%s/c.pem", g_dir);
  snprintf(why, sizeof(why), "%s/k.pem", g_dir);
  assert_int_equal(tlc_tls_new(cmd, why, &t, err, sizeof(err)), 0);
  {
    tlc_tls_t *t2 = NULL;
    /* the certificate given as the key: refused, and the message names the key */
    assert_true(tlc_tls_new(cmd, cmd, &t2, err, sizeof(err)) < 0);
    assert_null(t2);
    assert_non_null(strstr(err, "key"));
  }
  assert_int_equal(tlc_tls_reload(t, err, sizeof(err)), 0);
  c = tlc_tls_conn_new(t);
  assert_non_null(c);
  assert_int_equal(tlc_tls_conn_handshake(c, why, sizeof(why)), 0); /* nothing yet */
  srand(18);
  for (i = 0; i < sizeof(junk); i++)
    junk[i] = (uint8_t)rand();
  assert_int_equal(tlc_tls_conn_feed(c, junk, sizeof(junk)), 0);
  assert_true(tlc_tls_conn_handshake(c, why, sizeof(why)) < 0);
  tlc_tls_conn_free(c);
  /* plain protobuf (a Hello frame) to a TLS session */
  c = tlc_tls_conn_new(t);
  assert_int_equal(tlc_tls_conn_feed(c, "\x06\x08\x01\x52\x02\x08\x01", 7), 0);
  assert_true(tlc_tls_conn_handshake(c, why, sizeof(why)) < 0);
  tlc_tls_conn_free(c);
  tlc_tls_free(t);
}

static struct sockaddr_storage v4(const char *ip) {
  struct sockaddr_storage ss;
  struct sockaddr_in *a = (struct sockaddr_in *)&ss;
  memset(&ss, 0, sizeof(ss));
  a->sin_family = AF_INET;
  a->sin_port = htons(1234);
  assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
  return ss;
}

static struct sockaddr_storage v6(const char *ip) {
  struct sockaddr_storage ss;
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
  memset(&ss, 0, sizeof(ss));
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(99);
  assert_int_equal(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
  return ss;
}

/* Per-address counts: the cap per address, others unaffected, slots given back, an
 * IPv4-mapped address counted as its IPv4 address, a Unix peer not counted. */
static void test_peers(void **state) {
  tlc_peers_t p;
  size_t slots[20], s;
  struct sockaddr_storage a = v4("127.0.0.1"), b = v4("127.0.0.2"), m = v6("::ffff:127.0.0.1"),
                          l6 = v6("::1"), u;
  char name[64];
  (void)state;
  tlc_peers_init(&p, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&a, sizeof(a), &slots[i]), 0);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&a, sizeof(a), &s), TLC_ELIMIT);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&m, sizeof(m), &s), TLC_ELIMIT);
  assert_int_equal(p.refused, 2);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&b, sizeof(b), &slots[3]), 0);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&l6, sizeof(l6), &slots[4]), 0);
  tlc_peers_release(&p, slots[1]);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&m, sizeof(m), &slots[1]), 0);
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&a, sizeof(a), &s), TLC_ELIMIT);
  for (int i = 0; i < 5; i++)
    tlc_peers_release(&p, slots[i]);
  assert_int_equal(p.n, 0); /* every entry free again */
  memset(&u, 0, sizeof(u));
  u.ss_family = AF_UNIX;
  assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&u, sizeof(u), &s), 0);
  assert_true(s == TLC_PEERS_NONE);
  tlc_peers_release(&p, s);
  assert_string_equal(tlc_peers_name((struct sockaddr *)&m, sizeof(m), name, sizeof(name)),
                      "127.0.0.1");
  tlc_peers_fini(&p);
  tlc_peers_init(&p, 0); /* no cap: counted, never refused */
  for (int i = 0; i < 20; i++)
    assert_int_equal(tlc_peers_take(&p, (struct sockaddr *)&a, sizeof(a), &slots[i]), 0);
  tlc_peers_fini(&p);
}

static void test_loopback(void **state) {
  (void)state;
  assert_true(tlc_peers_host_is_loopback("127.0.0.1"));
  assert_true(tlc_peers_host_is_loopback("127.200.1.9"));
  assert_true(tlc_peers_host_is_loopback("127.255.255.255"));
  assert_true(tlc_peers_host_is_loopback("::1"));
  assert_true(tlc_peers_host_is_loopback("::ffff:127.0.0.1"));
  assert_true(tlc_peers_host_is_loopback("::ffff:127.3.2.1"));
  assert_true(tlc_peers_host_is_loopback("localhost"));
  assert_false(tlc_peers_host_is_loopback("::ffff:10.0.0.1"));
  assert_false(tlc_peers_host_is_loopback("128.0.0.1"));
  assert_false(tlc_peers_host_is_loopback("126.255.255.255"));
  assert_false(tlc_peers_host_is_loopback("127.0.0.1.evil.example"));
  assert_false(tlc_peers_host_is_loopback("localhost.evil.example"));
  assert_false(tlc_peers_host_is_loopback("example.org"));
  assert_false(tlc_peers_host_is_loopback("0.0.0.0"));
  assert_false(tlc_peers_host_is_loopback("::"));
  assert_false(tlc_peers_host_is_loopback("::2"));
  assert_false(tlc_peers_host_is_loopback(""));
}

/* `text` as a socket address (IPv4 or IPv6). */
static void sockaddr_of(const char *text, struct sockaddr_storage *ss) {
  struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
  memset(ss, 0, sizeof(*ss));
  a4->sin_family = AF_INET;
  if (inet_pton(AF_INET, text, &a4->sin_addr) == 1)
    return;
  memset(ss, 0, sizeof(*ss));
  a6->sin6_family = AF_INET6;
  assert_int_equal(inet_pton(AF_INET6, text, &a6->sin6_addr), 1);
}

/* The socket-address form that the subscriber port applies to bound sockets: the same answers
 * as the text form, for every family. */
static void test_loopback_sockaddr(void **state) {
  static const char *const yes[] = { "127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1" };
  static const char *const no[] = { "10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1" };
  struct sockaddr_storage ss;
  struct sockaddr_un un;
  (void)state;
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    sockaddr_of(yes[i], &ss);
    assert_true(tlc_peers_is_loopback((struct sockaddr *)&ss));
    assert_true(tlc_peers_host_is_loopback(yes[i]));
  }
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
    sockaddr_of(no[i], &ss);
    assert_false(tlc_peers_is_loopback((struct sockaddr *)&ss));
    assert_false(tlc_peers_host_is_loopback(no[i]));
  }
  memset(&un, 0, sizeof(un));
  un.sun_family = AF_UNIX;
  assert_false(tlc_peers_is_loopback((struct sockaddr *)&un)); /* not an IP address */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_peers),
    cmocka_unit_test(test_loopback),
    cmocka_unit_test(test_loopback_sockaddr),
    cmocka_unit_test(test_file_rules),
    cmocka_unit_test(test_check),
    cmocka_unit_test(test_delays),
    cmocka_unit_test(test_tls_garbage),
  };
  int r;
  snprintf(g_dir, sizeof(g_dir), "/tmp/tlc_auth_XXXXXX");
  if (mkdtemp(g_dir) == NULL)
    return 1;
  r = cmocka_run_group_tests(tests, NULL, NULL);
  {
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
      r = r ? r : 1;
  }
  return r;
}
