/* test_efldbg.c - the EFL debug protocol reader and parsers (formats/efldbg.c), the [efl NAME]
 * configuration, and the target names of efl sources ("SOURCE/APP-PID"). Packets are built
 * here byte by byte from docs/efl.md, not with the module's own builders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "config/config.h"
#include "formats/efldbg.h"
#include "formats/evlog.h"
#include "formats/mapping.h"
#include "ingest/target.h"
#include "testalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
  return 4;
}

/* A packet: header then payload; returns its length. */
static size_t pkt(uint8_t *out, int32_t cid, int32_t op, const void *payload, size_t len) {
  le32(out, (uint32_t)(12 + len));
  le32(out + 4, (uint32_t)cid);
  le32(out + 8, (uint32_t)op);
  if (len > 0)
    memcpy(out + 12, payload, len);
  return 12 + len;
}

/* Every chunk size from 1 to 40 gives the same messages as one push. */
static void test_reader_chunking(void **state) {
  uint8_t s[512], added[64], reply[200];
  size_t n = 0, an = 0;
  (void)state;
  an += le32(added, 3);
  an += le32(added + an, 4242);
  memcpy(added + an, "efl_app", 8);
  an += 8;
  for (size_t i = 0; i < sizeof(reply); i++)
    reply[i] = (uint8_t)i;
  n += pkt(s + n, 0, 5, added, an);  /* a control packet */
  n += pkt(s + n, 3, 7, reply, 150); /* streamed: the EvLog/get opcode */
  n += pkt(s + n, 3, 7, NULL, 0);    /* an empty answer: the CPU/Freq/on bug */
  n += pkt(s + n, 0, 9, reply, 100); /* over max_ctl (64): streamed too */
  for (size_t chunk = 1; chunk <= 41; chunk++) {
    tlc_efldbg_rd_t rd;
    size_t at = 0, ctl = 0, begins = 0, ends = 0, data = 0;
    int prefix_ok = 1;
    size_t step = chunk == 41 ? n : chunk;
    assert_int_equal(tlc_efldbg_rd_init(&rd, 0, 64, 4), 0);
    rd.stream_op = 7;
    while (at < n || rd.phase == 4) {
      size_t len = n - at < step ? n - at : step, used;
      tlc_efldbg_msg_t m;
      int k = tlc_efldbg_rd_push(&rd, s + at, len, &used, &m);
      assert_true(k >= 0);
      at += used;
      if (k == TLC_EFLDBG_CTL) {
        ctl++;
        assert_int_equal(m.hdr.opcode, 5);
        assert_int_equal(m.len, an);
        assert_memory_equal(m.data, added, an);
      } else if (k == TLC_EFLDBG_BEGIN) {
        begins++;
        if (m.hdr.size == 12)
          assert_int_equal(m.len, 0);
        else
          prefix_ok &= m.len == 4 && memcmp(m.data, reply, 4) == 0;
      } else if (k == TLC_EFLDBG_DATA) {
        data += m.len;
      } else if (k == TLC_EFLDBG_END) {
        ends++;
      }
    }
    assert_int_equal(ctl, 1);
    assert_int_equal(begins, 3);
    assert_int_equal(ends, 3);
    assert_true(prefix_ok);
    assert_int_equal(data, (150 - 4) + (100 - 4));
    assert_int_equal(rd.packets, 4);
    tlc_efldbg_rd_fini(&rd);
  }
}

static void test_reader_bad_sizes(void **state) {
  uint8_t s[24];
  size_t used;
  tlc_efldbg_msg_t m;
  tlc_efldbg_rd_t rd;
  (void)state;
  assert_int_equal(tlc_efldbg_rd_init(&rd, 0, 64, 4), 0);
  le32(s, 11);
  le32(s + 4, 0);
  le32(s + 8, 0);
  assert_int_equal(tlc_efldbg_rd_push(&rd, s, 12, &used, &m), TLC_EFRAME);
  assert_non_null(strstr(rd.err_reason, "below the 12-byte header"));
  assert_int_equal(tlc_efldbg_rd_push(&rd, s, 12, &used, &m), TLC_EFRAME); /* sticky */
  tlc_efldbg_rd_reset(&rd);
  le32(s, 10000001); /* one over EINA_DEBUG_MAX_PACKET_SIZE */
  assert_int_equal(tlc_efldbg_rd_push(&rd, s, 12, &used, &m), TLC_EFRAME);
  assert_non_null(strstr(rd.err_reason, "above the limit"));
  tlc_efldbg_rd_fini(&rd);
  assert_int_equal(tlc_efldbg_rd_init(&rd, 0, 64, TLC_EFLDBG_PREFIX_MAX + 1), TLC_EINVAL);
}

/* The reader allocates once, in init (a failure there is TLC_ENOMEM with nothing left), and
 * never while reading: a 1 MiB streamed answer and control packets cost no allocation. */
static void test_reader_allocation(void **state) {
  static uint8_t big[(1u << 20) + 64];
  uint8_t ctl[64];
  tlc_efldbg_rd_t rd;
  size_t n, at = 0, data = 0;
  (void)state;
  testalloc_install();
  testalloc_fail_at(1);
  assert_int_equal(tlc_efldbg_rd_init(&rd, 0, 64, 4), TLC_ENOMEM);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_fail_at(0);
  assert_int_equal(tlc_efldbg_rd_init(&rd, 0, 64, 4), 0);
  rd.stream_op = 7;
  memset(ctl, 'x', sizeof(ctl));
  n = pkt(big, 0, 5, ctl, 10);
  le32(big + n, (uint32_t)(sizeof(big) - n));
  le32(big + n + 4, 3);
  le32(big + n + 8, 7);
  testalloc_fail_at(0); /* restarts the count */
  while (at < sizeof(big) || rd.phase == 4) {
    size_t used;
    tlc_efldbg_msg_t m;
    size_t len = sizeof(big) - at < 4096 ? sizeof(big) - at : 4096;
    assert_true(tlc_efldbg_rd_push(&rd, big + at, len, &used, &m) >= 0);
    at += used;
    if (m.kind == TLC_EFLDBG_DATA)
      data += m.len;
  }
  assert_int_equal(testalloc_count(), 0);
  assert_int_equal(data, sizeof(big) - n - 12 - 4);
  tlc_efldbg_rd_fini(&rd);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

static void test_payloads(void **state) {
  uint8_t p[64];
  size_t n = 0, off = 0, k;
  tlc_efldbg_client_t c;
  int32_t cid, ids[4];
  uint64_t cookie;
  (void)state;
  /* two added records, then one cut short */
  n += le32(p + n, 1);
  n += le32(p + n, 100);
  memcpy(p + n, "a\0", 2);
  n += 2;
  n += le32(p + n, 2);
  n += le32(p + n, 200);
  memcpy(p + n, "\0", 1);
  n += 1;
  assert_int_equal(tlc_efldbg_added_next(p, n, &off, &c), 1);
  assert_int_equal(c.cid, 1);
  assert_int_equal(c.pid, 100);
  assert_string_equal(c.name, "a");
  assert_int_equal(tlc_efldbg_added_next(p, n, &off, &c), 1);
  assert_string_equal(c.name, "");
  assert_int_equal(tlc_efldbg_added_next(p, n, &off, &c), 0);
  off = 0;
  assert_int_equal(tlc_efldbg_added_next(p, 10, &off, &c), 1);
  assert_int_equal(tlc_efldbg_added_next(p, 10 + 8, &off, &c), TLC_EFRAME); /* no NUL */
  off = 0;
  assert_int_equal(tlc_efldbg_deleted_next(p, 6, &off, &cid), 1);
  assert_int_equal(cid, 1);
  assert_int_equal(tlc_efldbg_deleted_next(p, 6, &off, &cid), TLC_EFRAME);
  /* register answer: cookie + ids */
  n = le32(p, 0x55667788);
  n += le32(p + n, 0x11223344);
  n += le32(p + n, 4);
  n += le32(p + n, 999);
  assert_int_equal(tlc_efldbg_register_reply(p, n, &cookie, ids, 4, &k), 0);
  assert_true(cookie == 0x1122334455667788ull);
  assert_int_equal(k, 2);
  assert_int_equal(ids[1], 999);
  assert_int_equal(tlc_efldbg_register_reply(p, n, &cookie, ids, 1, &k), TLC_EFRAME);
  assert_int_equal(tlc_efldbg_register_reply(p, n - 1, &cookie, ids, 4, &k), TLC_EFRAME);
  le32(p + 12, 1000); /* beyond efl_debugd's MAX_OPCODES */
  assert_int_equal(tlc_efldbg_register_reply(p, n, &cookie, ids, 4, &k), TLC_EFRAME);
}

static void test_evlog_header(void **state) {
  uint8_t h[12], ovf[4] = { 3, 0, 0, 0 };
  const uint8_t want[12] = { 0x11, 0xe2, 0xfe, 0x0f, 0x30, 0, 0, 0, 3, 0, 0, 0 };
  (void)state;
  tlc_efldbg_evlog_header(h, 0x30, ovf);
  assert_memory_equal(h, want, 12);
}

static int build(tlc_config_t *c, const char *ini, char **argv, int argc, char *err,
                 size_t errlen) {
  char path[] = "/tmp/tlc_efl_cfgXXXXXX";
  tlc_cli_t cli;
  int fd = mkstemp(path), r;
  char *args[8];
  assert_true(fd >= 0);
  assert_int_equal(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
  close(fd);
  args[0] = "tlcapd";
  args[1] = "--config";
  args[2] = path;
  for (int i = 0; i < argc; i++)
    args[3 + i] = argv[i];
  r = tlc_cli_parse(&cli, 3 + argc, args, err, errlen);
  if (r == 0)
    r = tlc_config_build(c, &cli, err, errlen);
  unlink(path);
  return r;
}

static void test_config_efl(void **state) {
  tlc_config_t c;
  char err[512] = "";
  char *cli[] = { "--efl", "lab=elementary_*", "--efl", "two=1234" };
  (void)state;
  assert_int_equal(build(&c, "[efl lab]\npattern = x\npoll_ms = 50\n", cli, 4, err, sizeof(err)),
                   0);
  assert_int_equal(c.nsrc, 2);
  assert_int_equal(c.src[0].kind, TLC_SRC_EFL);
  assert_string_equal(c.src[0].pattern, "elementary_*"); /* the command line wins */
  assert_int_equal(c.src[0].poll_ms, 50);                /* the file's other keys stay */
  assert_string_equal(c.src[0].host, "127.0.0.1");
  assert_int_equal(c.src[0].port, 6666);
  assert_int_equal(c.src[0].format, TLC_FMT_EVLOG);
  assert_string_equal(c.src[1].pattern, "1234");
  assert_int_equal(c.src[1].poll_ms, 200);
  tlc_config_fini(&c);
  assert_int_equal(
      build(&c, "[efl a]\npattern = *\ndebugd = 10.1.2.3:7000\n", NULL, 0, err, sizeof(err)), 0);
  assert_string_equal(c.src[0].host, "10.1.2.3");
  assert_int_equal(c.src[0].port, 7000);
  tlc_config_fini(&c);
  assert_int_not_equal(build(&c, "[efl a]\npattern = *\npoll_ms = 5\n", NULL, 0, err, sizeof(err)),
                       0);
  assert_non_null(strstr(err, ":3: [efl a] poll_ms"));
  assert_int_not_equal(
      build(&c, "[efl a]\npattern = *\nformat = bin11\n", NULL, 0, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "unknown option for an [efl] section"));
  assert_int_not_equal(
      build(&c, "[efl a]\ndebugd = /run/x/.edebug/efl_debug/0\n", NULL, 0, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "TCP port"));
  assert_int_not_equal(build(&c, "[efl a/b]\npattern = *\n", NULL, 0, err, sizeof(err)), 0);
  /* one name for a dial and an efl source would mix their directories */
  assert_int_not_equal(build(&c,
                             "[efl a]\npattern = *\n[dial a]\nformat = evlog\n"
                             "address = 127.0.0.1:1\n",
                             NULL, 0, err, sizeof(err)),
                       0);
  assert_non_null(strstr(err, "name already used"));
}

/* One evlog block (header + items) of the given event strings, one thread, into out. */
static size_t evblock(uint8_t *out, size_t cap, const char *const *evs, size_t n, double t0) {
  size_t at = 12;
  for (size_t i = 0; i < n; i++) {
    int k =
        tlc_evlog_item_build(out + at, cap - at, t0 + (double)i * 1e-3, 0.0, 7, 0, evs[i], NULL, 0);
    assert_true(k > 0);
    at += (size_t)k;
  }
  le32(out, 0x0ffee211u);
  le32(out + 4, (uint32_t)(at - 12));
  le32(out + 8, 0);
  return at;
}

/* Live names of an evlog target: the names its items gave, renewed when new ones appear. */
static void test_evlog_target_names(void **state) {
  static const char *const first[] = { "+alpha", "-alpha", "!tick" };
  static const char *const second[] = { "+beta", "-beta" };
  tlc_targets_t reg;
  tlc_target_t *t = NULL;
  tlc_target_conf_t conf;
  const tlc_mapping_t *m;
  uint8_t b[1024];
  size_t n;
  int src = 1;
  (void)state;
  assert_int_equal(tlc_targets_init(&reg, 4), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_EVLOG;
  assert_int_equal(tlc_targets_get(&reg, "lab/app-1", TLC_SRC_EFL, &conf, &t), 0);
  assert_null(tlc_target_names(t)); /* no item yet */
  assert_int_equal(tlc_target_attach(t, &src, "x"), 0);
  n = evblock(b, sizeof(b), first, 3, 1.0);
  assert_int_equal(tlc_target_feed(t, b, n), 0);
  m = tlc_target_names(t);
  assert_non_null(m);
  assert_int_equal(m->nareas, 2);
  assert_string_equal(tlc_mapping_find(m, 0x00000000)->name, "alpha");
  assert_string_equal(tlc_mapping_find(m, 0x20000000)->name, "tick");
  n = evblock(b, sizeof(b), second, 2, 2.0);
  assert_int_equal(tlc_target_feed(t, b, n), 0);
  m = tlc_target_names(t);
  assert_int_equal(m->nareas, 3);
  assert_string_equal(tlc_mapping_find(m, 0x00000001)->name, "beta");
  tlc_target_detach(t, "test");
  tlc_targets_fini(&reg);
}

static void test_target_names(void **state) {
  (void)state;
  assert_int_equal(tlc_target_name_check_efl("lab/efl_app-42", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("/app-1", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab/", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab/a/b", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab/../x", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab/.x", 64), 0);
  assert_int_not_equal(tlc_target_name_check_efl("lab/efl_app-42", 8), 0);
  /* and the general rule (preambles, other sources) still refuses '/' */
  assert_int_not_equal(tlc_target_name_check("lab/efl_app-42", 64), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reader_chunking),    cmocka_unit_test(test_reader_bad_sizes),
    cmocka_unit_test(test_payloads),           cmocka_unit_test(test_reader_allocation),
    cmocka_unit_test(test_evlog_header),       cmocka_unit_test(test_config_efl),
    cmocka_unit_test(test_evlog_target_names), cmocka_unit_test(test_target_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
