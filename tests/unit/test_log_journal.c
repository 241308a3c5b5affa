/* test_log_journal.c - log lines under systemd: journald's native protocol with structured
 * fields, and the stderr fallback when journald does not take a datagram.
 *
 * The "journal" is a datagram socket this test binds in a temporary directory; stderr is a
 * temporary file whose dev:ino goes into JOURNAL_STREAM, as systemd sets it. The expected
 * fields are written out by hand from each message's text (the callers' conventions in log.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void test_fields_from_messages(void **state) {
  static const struct {
    unsigned comp;
    const char *msg, *target, *peer, *segment, *device;
  } cases[] = {
    { TLC_LOGC_TARGET, "target lab@10.0.0.5 (10.0.0.5:40112): disconnected: eof", "lab@10.0.0.5",
      "10.0.0.5:40112", "", "" },
    { TLC_LOGC_TARGET, "target probe1: created (bin11, dial)", "probe1", "", "", "" },
    { TLC_LOGC_TARGET, "target lab@::1 ([::1]:5000): resync: 3 bytes skipped", "lab@::1",
      "[::1]:5000", "", "" },
    { TLC_LOGC_TCP, "connection 127.0.0.1:5555 on bin11 (target bin11@127.0.0.1): eof",
      "bin11@127.0.0.1", "127.0.0.1:5555", "", "" },
    { TLC_LOGC_DIAL, "dial probe1 (probe1.lab:4711): connection refused; retrying in 400 ms",
      "probe1", "probe1.lab:4711", "", "" },
    { TLC_LOGC_SERIAL, "serial board (/dev/ttyUSB0): open, 921600 baud 8N1", "board", "", "",
      "/dev/ttyUSB0" },
    { TLC_LOGC_PUBSUB, "sub#3 127.0.0.1:41000: closing: peer closed", "", "127.0.0.1:41000", "",
      "" },
    { TLC_LOGC_STORE, "probe1: sealed /var/lib/tlcapd/probe1/20260101T000000Z-000001.txt.BIN",
      "probe1", "", "/var/lib/tlcapd/probe1/20260101T000000Z-000001.txt.BIN", "" },
    { TLC_LOGC_STORE, "retention: deleted /s/app@10.0.0.7/20260101T000000Z-000003.log.zst (seq 3)",
      "app@10.0.0.7", "", "/s/app@10.0.0.7/20260101T000000Z-000003.log.zst", "" },
    { TLC_LOGC_STORE, "reconfigure: out of memory; old limits kept", "", "", "", "" },
    { TLC_LOGC_MAIN, "tlcapd ready: 2 listeners, 0 targets", "", "", "", "" },
  };
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tlc_log_fields_t f;
    tlc_log_fields(cases[i].msg, cases[i].comp, &f);
    if (strcmp(f.target, cases[i].target) != 0 || strcmp(f.peer, cases[i].peer) != 0 ||
        strcmp(f.segment, cases[i].segment) != 0 || strcmp(f.device, cases[i].device) != 0)
      fail_msg("case %zu \"%s\": target \"%s\" peer \"%s\" segment \"%s\" device \"%s\"", i,
               cases[i].msg, f.target, f.peer, f.segment, f.device);
  }
}

static int has_line(const char *dg, const char *line) {
  size_t n = strlen(line);
  for (const char *p = dg; p != NULL && *p != '\0';
       p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
      return 1;
  return 0;
}

static void test_native_protocol_and_fallback(void **state) {
  char dir[] = "/tmp/tlc_journal_XXXXXX", path[64], efile[160], js[64], dg[4096], text[4096];
  struct sockaddr_un sa;
  struct stat st;
  int rx, efd, saved = dup(2);
  ssize_t n;
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/socket", dir);
  snprintf(efile, sizeof(efile), "%s/stderr", dir);
  rx = socket(AF_UNIX, SOCK_DGRAM, 0);
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  assert_int_equal(bind(rx, (struct sockaddr *)&sa, sizeof(sa)), 0);
  efd = open(efile, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true(efd >= 0 && saved >= 0);
  assert_int_equal(dup2(efd, 2), 2);
  assert_int_equal(fstat(2, &st), 0);
  snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino);
  setenv("JOURNAL_STREAM", js, 1);
  tlc_log_init();
  tlc_log_set_journal_socket(path);

  tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s (%s): %s", "lab@10.0.0.5", "10.0.0.5:40112",
          "decode error at byte 48");
  n = recv(rx, dg, sizeof(dg) - 1, MSG_DONTWAIT);
  assert_true(n > 0);
  dg[n] = '\0';
  assert_true(has_line(dg, "MESSAGE=target: target lab@10.0.0.5 (10.0.0.5:40112): decode error "
                           "at byte 48"));
  assert_true(has_line(dg, "PRIORITY=4"));
  assert_true(has_line(dg, "SYSLOG_IDENTIFIER=tlcapd"));
  assert_true(has_line(dg, "TLCAP_COMPONENT=target"));
  assert_true(has_line(dg, "TARGET=lab@10.0.0.5"));
  assert_true(has_line(dg, "PEER=10.0.0.5:40112"));
  assert_false(has_line(dg, "SEGMENT="));
  assert_int_equal(tlc_log_journal_fallbacks(), 0);

  /* The rate limiter still applies: a site's burst, then nothing until the interval ends. */
  for (int i = 0; i < TLC_LOG_BURST + 5; i++)
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TCP, "connection %s on bin11: closed %d", "127.0.0.1:1", i);
  for (int i = 0; i < TLC_LOG_BURST; i++)
    assert_true(recv(rx, dg, sizeof(dg), MSG_DONTWAIT) > 0);
  assert_true(recv(rx, dg, sizeof(dg), MSG_DONTWAIT) < 0);

  /* journald gone: the line goes to stderr with its priority prefix, nothing is lost. */
  close(rx);
  unlink(path);
  tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "%s", "probe1: cannot seal /s/probe1/a-000001.log.part");
  tlc_log_flush(1); /* also writes the rate limiter's summary of the 5 suppressed lines */
  assert_int_equal(tlc_log_journal_fallbacks(), 2);
  n = pread(efd, text, sizeof(text) - 1, 0);
  assert_true(n > 0);
  text[n] = '\0';
  assert_non_null(strstr(text, "<3>store: probe1: cannot seal /s/probe1/a-000001.log.part\n"));
  assert_non_null(strstr(text, "<5>tcp: suppressed 5 messages like: connection %s on bin11"));

  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  close(efd);
  unlink(efile);
  rmdir(dir);
  unsetenv("JOURNAL_STREAM");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fields_from_messages),
    cmocka_unit_test(test_native_protocol_and_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
