/* test_config.c - tlcapd configuration: INI keys, command line, defaults, and error messages
 * that name file:line and option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/log.h"
#include "config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

static int build(tlc_config_t *c, int argc, char **argv, char *err, size_t errlen) {
  tlc_cli_t cli;
  int r = tlc_cli_parse(&cli, argc, argv, err, errlen);
  if (r != 0)
    return r;
  return tlc_config_build(c, &cli, err, errlen);
}

static void test_embedded_default(void **state) {
  tlc_config_t c;
  char err[256] = "";
  char *argv[] = { "tlcapd" };
  (void)state;
  assert_int_equal(build(&c, 1, argv, err, sizeof(err)), 0);
  assert_int_equal(c.nsrc, 2);
  assert_string_equal(c.src[0].name, "bin11");
  assert_int_equal(c.src[0].format, TLC_FMT_BIN11);
  assert_string_equal(c.src[0].host, "127.0.0.1");
  assert_int_equal(c.src[0].port, 7411);
  assert_string_equal(c.src[1].name, "evlog");
  assert_int_equal(c.src[1].port, 7412);
  assert_string_equal(c.serve, "127.0.0.1:7400");
  assert_string_equal(c.state_dir, "./tlcap-state");
  assert_int_equal(c.store, 1);
  tlc_config_fini(&c);
}

static void test_ini_all_sections(void **state) {
  tlc_config_t c;
  char err[256] = "";
  const char *ini = "; comment\n"
                    "[daemon]\n"
                    "state_dir = /var/lib/tlcapd\n"
                    "store = no\n"
                    "serve = [::1]:7400\n"
                    "log_level = debug\n"
                    "debug = tcp,serial\n"
                    "max_connections = 1k\n"
                    "partial_timeout = 2.5s\n"
                    "windows = 1s, 5s\n"
                    "[listen lab]\n"
                    "format = evlog\n"
                    "address = 0.0.0.0:9000\n"
                    "context_area = 0x30000000\n"
                    "[dial probe]\n"
                    "format = bin10\n"
                    "address = probe.example:4000\n"
                    "mapping = /etc/tlcap/probe.txt\n"
                    "[serial board]\n"
                    "format = bin11\n"
                    "device = /dev/ttyUSB0\n"
                    "baud = 921600\n"
                    "data_bits = 7\n"
                    "parity = even\n"
                    "stop_bits = 2\n"
                    "flow = rtscts\n"
                    "[target lab@10.0.0.7]\n"
                    "context_area = 30000001\n";
  (void)state;
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_string(&c, ini, "t.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), 0);
  assert_string_equal(c.state_dir, "/var/lib/tlcapd");
  assert_int_equal(c.store, 0);
  assert_string_equal(c.serve, "[::1]:7400");
  assert_int_equal(c.log_level, 7);
  assert_int_equal(c.max_connections, 1024);
  assert_int_equal(c.partial_timeout_ms, 2500);
  assert_int_equal(c.nwindows, 2);
  assert_true(c.window_ns[1] == 5000000000ll);
  assert_int_equal(c.nsrc, 3);
  assert_int_equal(c.src[0].kind, TLC_SRC_LISTEN);
  assert_int_equal(c.src[0].tset.has_context_area, 1);
  assert_int_equal(c.src[0].tset.context_area, 0x30000000u);
  assert_int_equal(c.src[1].kind, TLC_SRC_DIAL);
  assert_string_equal(c.src[1].host, "probe.example");
  assert_string_equal(c.src[1].tset.mapping, "/etc/tlcap/probe.txt");
  assert_int_equal(c.src[2].baud, 921600);
  assert_int_equal(c.src[2].data_bits, 7);
  assert_int_equal(c.src[2].parity, TLC_PARITY_EVEN);
  assert_int_equal(c.src[2].stop_bits, 2);
  assert_int_equal(c.src[2].flow, TLC_FLOW_RTSCTS);
  /* [target NAME] wins over the source's settings */
  assert_int_equal(tlc_config_tset(&c, &c.src[0], "lab@10.0.0.7")->context_area, 0x30000001u);
  assert_int_equal(tlc_config_tset(&c, &c.src[0], "lab@10.0.0.8")->context_area, 0x30000000u);
  tlc_config_fini(&c);
}

/* Each bad line yields "origin:LINE: [section] option: reason". */
static void test_ini_errors_name_line(void **state) {
  static const struct {
    const char *ini;
    const char *want;
  } cases[] = {
    { "[daemon]\nstore = maybe\n", "f.ini:2: [daemon] store: expected yes or no" },
    { "[daemon]\n\nbogus = 1\n", "f.ini:3: [daemon] bogus: unknown option" },
    { "[listen a]\nformat = bin12\n", "f.ini:2: [listen a] format: expected bin10" },
    { "[listen a]\nformat = bin11\naddress = nowhere\n", "f.ini:3: [listen a] address:" },
    { "[serial s]\nbaud = 12345\n", "f.ini:2: [serial s] baud: unsupported baud rate" },
    { "[serial s]\nparity = mark\n", "f.ini:2: [serial s] parity:" },
    { "[weird x]\nk = v\n", "f.ini:2: [weird x] k: unknown section kind" },
    { "[listen ../x]\nformat = bin11\n", "f.ini:2: [listen ../x] format: invalid name" },
    { "[daemon]\nmax_name = 1000\n", "f.ini:2: [daemon] max_name: expected a number" },
    { "[daemon]\nwindows = 1s,2s,3s,4s,5s\n", "f.ini:2: [daemon] windows:" },
    { "[daemon]\npartial_timeout = -1s\n", "f.ini:2: [daemon] partial_timeout:" },
    { "[daemon]\nno equals sign here\n", "f.ini:2: syntax error" },
    { "[target t]\ncontext_area = xyz\n", "f.ini:2: [target t] context_area:" },
    { "[target t]\ncontext_id_mask = 0\n", "f.ini:2: [target t] context_id_mask: expected a" },
    { "[target t]\ncontext_running = 1,q\n", "f.ini:2: [target t] context_running: expected" },
    { "[target t]\ncontext_rtos = /nonexistent/rtos.xml\n",
      "f.ini:2: [target t] context_rtos: /nonexistent/rtos.xml:" },
  };
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tlc_config_t c;
    char err[256] = "";
    assert_int_equal(tlc_config_init(&c), 0);
    assert_true(tlc_config_load_string(&c, cases[i].ini, "f.ini", err, sizeof(err)) < 0);
    if (strstr(err, cases[i].want) == NULL)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
    tlc_config_fini(&c);
  }
}

/* Packed task variables: the keys, their defaults, and a half-set or context_area-less one
 * refused by validation. */
static void test_packed_context(void **state) {
  tlc_config_t c;
  tlc_ctxpack_t p;
  char err[256] = "";
  uint64_t task;
  (void)state;
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_string(&c,
                                          "[target a]\ncontext_area = 30000000\n"
                                          "context_id_mask = 0000FFFF\n"
                                          "context_state_mask = 0x00FF0000\n"
                                          "[target b]\ncontext_area = 30000000\n"
                                          "context_id_mask = FF\ncontext_state_mask = F00\n"
                                          "context_running = 1, 3\ncontext_stopped = 5\n",
                                          "p.ini", err, sizeof(err)),
                   0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), 0);
  tlc_config_ctxpack(tlc_config_tset(&c, NULL, "a"), &p);
  assert_true(tlc_ctxpack_on(&p));
  assert_int_equal(p.shift, 16);
  /* defaults: 1 runs, every other state stops; the reason bits are ignored */
  assert_int_equal(tlc_ctxpack_classify(&p, 0x07050003, &task), TLC_CTXPACK_STOP);
  assert_int_equal(task, 3);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x09010003, &task), TLC_CTXPACK_RUN);
  tlc_config_ctxpack(tlc_config_tset(&c, NULL, "b"), &p);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x307, &task), TLC_CTXPACK_RUN);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x507, &task), TLC_CTXPACK_STOP);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x207, &task), TLC_CTXPACK_NONE);
  tlc_config_ctxpack(tlc_config_tset(&c, NULL, "other"), &p);
  assert_false(tlc_ctxpack_on(&p));
  tlc_config_fini(&c);

  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_string(&c,
                                          "[target a]\ncontext_area = 30000000\n"
                                          "context_id_mask = FFFF\n",
                                          "p.ini", err, sizeof(err)),
                   0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "[target a]: context_id_mask and context_state_mask go together"));
  tlc_config_fini(&c);

  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_string(&c,
                                          "[target a]\ncontext_id_mask = FFFF\n"
                                          "context_state_mask = FF0000\n",
                                          "p.ini", err, sizeof(err)),
                   0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "needs context_area"));
  tlc_config_fini(&c);
}

static void test_validate_missing(void **state) {
  tlc_config_t c;
  char err[256] = "";
  (void)state;
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(
      tlc_config_load_string(&c, "[listen a]\nformat = bin11\n", "g.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "g.ini:2: [listen a]: missing option \"address\""));
  tlc_config_fini(&c);
}

/* [budget NAME] sections and --budgets FILE (docs/budgets.md): both kinds together, each
 * budget complete, a bad file or a name defined twice refused with FILE:LINE. */
static void test_budgets(void **state) {
  static const char ini[] = "[budget tick]\narea = SysTick_Handler\nstat = period\n"
                            "min = 950us\nmax = 1.05ms\n";
  char path[] = "/tmp/test_config_budgetsXXXXXX", err[600] = "";
  tlc_config_t c;
  FILE *f;
  int fd = mkstemp(path);
  (void)state;
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  fputs("# file\n[budget ctl]\narea = vControlTask\ncontext = ControlTask\nstat = net\n"
        "max = 250us\n",
        f);
  fclose(f);
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(c.budget_keep, 100);
  assert_int_equal(tlc_config_load_string(&c, ini, "t.ini", err, sizeof(err)), 0);
  snprintf(c.budgets, sizeof(c.budgets), "%s", path);
  assert_int_equal(tlc_config_load_budgets(&c, err, sizeof(err)), 0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), 0);
  assert_int_equal(c.bset.n, 2);
  assert_string_equal(c.bset.b[0].name, "tick");
  assert_string_equal(c.bset.b[0].origin, "t.ini:2");
  assert_int_equal(c.bset.b[0].min, 950000);
  assert_int_equal(c.bset.b[0].max, 1050000);
  assert_string_equal(c.bset.b[1].name, "ctl");
  assert_string_equal(c.bset.b[1].context, "ControlTask");
  assert_int_equal(c.bset.b[1].max, 250000);
  /* the file's budget again: a second definition */
  assert_int_equal(tlc_config_load_budgets(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, ":2: [budget ctl] a second budget named ctl"));
  tlc_config_fini(&c);
  /* an incomplete section, a bad value, an unknown key: FILE:LINE, section, key */
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(
      tlc_config_load_string(&c, "[budget q]\nstat = net\n", "q.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "q.ini:2: [budget q] area: missing"));
  tlc_config_fini(&c);
  assert_int_equal(tlc_config_init(&c), 0);
  assert_true(tlc_config_load_string(&c, "[budget q]\narea = x\nmax = 2 fortnights\n", "q.ini", err,
                                     sizeof(err)) < 0);
  assert_non_null(strstr(err, "q.ini:3: [budget q] max: "));
  tlc_config_fini(&c);
  assert_int_equal(tlc_config_init(&c), 0);
  f = fopen(path, "w");
  fputs("[budget z]\narea = x\ncolour = red\n", f);
  fclose(f);
  snprintf(c.budgets, sizeof(c.budgets), "%s", path);
  assert_int_equal(tlc_config_load_budgets(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, ":3: [budget z] colour: unknown key"));
  tlc_config_fini(&c);
  unlink(path);
}

static void test_cli(void **state) {
  tlc_config_t c;
  char err[256] = "";
  char *argv[] = { "tlcapd",
                   "--state-dir",
                   "/tmp/s",
                   "--listen",
                   "ing=bin11@127.0.0.1:7000",
                   "--listen=ev=evlog@[::1]:7001",
                   "--dial",
                   "probe=bin10@localhost:4000",
                   "--serial",
                   "lab=bin11@/dev/ttyUSB0:57600",
                   "--serial",
                   "lab2=bin11@/dev/serial/by-id/usb-X:if00",
                   "--serve",
                   "127.0.0.1:7500",
                   "--no-store",
                   "--max-connections",
                   "64",
                   "--partial-timeout=250ms",
                   "--mapping",
                   "probe=/m.txt",
                   "--context-area",
                   "ing@127.0.0.1=0x30000000" };
  (void)state;
  assert_int_equal(build(&c, (int)(sizeof(argv) / sizeof(argv[0])), argv, err, sizeof(err)), 0);
  assert_string_equal(c.state_dir, "/tmp/s");
  assert_int_equal(c.nsrc, 5); /* no embedded default when sources are given */
  assert_int_equal(c.src[0].port, 7000);
  assert_string_equal(c.src[1].host, "::1");
  assert_int_equal(c.src[1].format, TLC_FMT_EVLOG);
  assert_int_equal(c.src[2].kind, TLC_SRC_DIAL);
  assert_string_equal(c.src[3].device, "/dev/ttyUSB0");
  assert_int_equal(c.src[3].baud, 57600);
  assert_string_equal(c.src[4].device, "/dev/serial/by-id/usb-X:if00");
  assert_int_equal(c.src[4].baud, 115200);
  assert_string_equal(c.serve, "127.0.0.1:7500");
  assert_int_equal(c.store, 0);
  assert_int_equal(c.max_connections, 64);
  assert_int_equal(c.partial_timeout_ms, 250);
  assert_string_equal(tlc_config_tset(&c, &c.src[2], "probe")->mapping, "/m.txt");
  assert_int_equal(tlc_config_tset(&c, &c.src[0], "ing@127.0.0.1")->context_area, 0x30000000u);
  tlc_config_fini(&c);
}

static void test_cli_errors(void **state) {
  static const char *const bad[][3] = {
    { "--listen", "x=bin11@127.0.0.1", "--listen: expected HOST:PORT" },
    { "--listen", "x=bin13@127.0.0.1:1", "unknown format \"bin13\"" },
    { "--dial", "x=bin11@h:0", "--dial: expected HOST:PORT" },
    { "--serial", "x=bin11@/dev/tty:7", "unsupported baud rate" },
    { "--frobnicate", "1", "unknown option \"--frobnicate\"" },
    { "--max-connections", "-1", "--max-connections: expected a number" },
    { "--log-level", "loud", "--log-level: expected err" },
  };
  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tlc_config_t c;
    char err[256] = "";
    char *argv[] = { "tlcapd", (char *)bad[i][0], (char *)bad[i][1] };
    assert_true(build(&c, 3, argv, err, sizeof(err)) < 0);
    if (strstr(err, bad[i][2]) == NULL || strncmp(err, "command line", 12) != 0)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, bad[i][2]);
  }
}

/* getopt_long: short options, abbreviations, a [daemon] key given as --key=value
 * and --key value, the messages of usage errors, and a second parse in the same process. */
static void test_cli_getopt(void **state) {
  static const char *const bad[][4] = {
    { "--no-store=1", NULL, NULL, "--no-store takes no value" },
    { "--listen", NULL, NULL, "--listen needs a value" },
    { "-c", NULL, NULL, "-c needs a value" },
    { "-x", NULL, NULL, "unknown option \"-x\"" },
    { "--max", "3", NULL, "unknown option \"--max\"" }, /* ambiguous: max-connections, ... */
    { "--serve", "127.0.0.1:1", "stray", "unexpected argument \"stray\"" },
  };
  tlc_config_t c;
  tlc_cli_t cli;
  char err[256] = "";
  char *argv[] = { "tlcapd", "-q", "--max-conn=12", "--store-queue", "8M", "--no-store" };
  char *argv2[] = { "tlcapd", "-v", "--retain-segments", "5" };
  (void)state;
  assert_int_equal(build(&c, 6, argv, err, sizeof(err)), 0);
  assert_int_equal(c.log_level, TLC_LOG_WARN);
  assert_int_equal(c.max_connections, 12);
  assert_int_equal(c.store_queue, 8u << 20);
  assert_int_equal(c.store, 0);
  tlc_config_fini(&c);
  assert_int_equal(build(&c, 4, argv2, err, sizeof(err)), 0);
  assert_int_equal(c.log_level, TLC_LOG_DEBUG);
  assert_int_equal(c.retain_segments, 5);
  tlc_config_fini(&c);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *av[] = { "tlcapd", (char *)bad[i][0], (char *)bad[i][1], (char *)bad[i][2] };
    int ac = bad[i][1] == NULL ? 2 : bad[i][2] == NULL ? 3 : 4;
    err[0] = '\0';
    assert_int_equal(tlc_cli_parse(&cli, ac, av, err, sizeof(err)), TLC_EINVAL);
    if (strstr(err, bad[i][3]) == NULL || strncmp(err, "command line", 12) != 0)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, bad[i][3]);
  }
}

/* Storage keys (docs/configuration.md "Storage"): defaults, INI, command line, errors. */
static void test_storage_keys(void **state) {
  tlc_config_t c;
  char err[256] = "";
  static const char ini[] = "[daemon]\n"
                            "rotate_bytes = 1M\n"
                            "rotate_age = 10m\n"
                            "retain_bytes = 10G\n"
                            "retain_target_bytes = 2G\n"
                            "retain_age = 48h\n"
                            "retain_segments = 100\n"
                            "min_free = 512M\n"
                            "sync = periodic\n"
                            "sync_interval = 5s\n"
                            "sync_bytes = 8M\n"
                            "compress = yes\n"
                            "index_interval = 256\n"
                            "store_queue = 32M\n"
                            "quick_start = on\n"
                            "main_export = xml\n"
                            "keep_skipped = 64k\n"
                            "[listen a]\nformat = bin11\naddress = 127.0.0.1:1\n";
  (void)state;
  /* defaults */
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(c.rotate_bytes, 64ull << 20);
  assert_int_equal(c.rotate_age_ms, 0);
  assert_int_equal(c.retain_bytes, 0);
  assert_int_equal(c.retain_segments, 0);
  assert_int_equal(c.sync_mode, 0);
  assert_int_equal(c.compress, 0);
  assert_int_equal(c.index_interval, 1024);
  assert_int_equal(c.store_queue, 64ull << 20);
  assert_int_equal(c.quick_start, 0);
  assert_int_equal(c.main_export, 0);
  assert_int_equal(c.keep_skipped, 0);
  /* INI */
  assert_int_equal(tlc_config_load_string(&c, ini, "s.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), 0);
  assert_int_equal(c.rotate_bytes, 1u << 20);
  assert_int_equal(c.rotate_age_ms, 600000);
  assert_int_equal(c.retain_bytes, 10ull << 30);
  assert_int_equal(c.retain_target_bytes, 2ull << 30);
  assert_int_equal(c.retain_age_ms, 48ull * 3600 * 1000);
  assert_int_equal(c.retain_segments, 100);
  assert_int_equal(c.min_free, 512u << 20);
  assert_int_equal(c.sync_mode, 2);
  assert_int_equal(c.sync_interval_ms, 5000);
  assert_int_equal(c.sync_bytes, 8u << 20);
  assert_int_equal(c.compress, 1);
  assert_int_equal(c.index_interval, 256);
  assert_int_equal(c.store_queue, 32u << 20);
  assert_int_equal(c.quick_start, 1);
  assert_int_equal(c.main_export, 1);
  assert_int_equal(c.keep_skipped, 65536);
  tlc_config_fini(&c);
  /* command line: the same keys with '-' */
  {
    char *argv[] = { "tlcapd",
                     "--rotate-bytes",
                     "480",
                     "--rotate-age",
                     "2s",
                     "--retain-bytes",
                     "1M",
                     "--retain-target-bytes=64k",
                     "--retain-age",
                     "1h",
                     "--retain-segments",
                     "3",
                     "--min-free",
                     "1G",
                     "--sync",
                     "never",
                     "--sync-interval",
                     "250ms",
                     "--sync-bytes",
                     "1M",
                     "--compress",
                     "no",
                     "--index-interval",
                     "16",
                     "--store-queue",
                     "8M",
                     "--quick-start",
                     "yes",
                     "--main-export=xml",
                     "--main-export",
                     "text1" };
    assert_int_equal(build(&c, (int)(sizeof(argv) / sizeof(argv[0])), argv, err, sizeof(err)), 0);
    assert_int_equal(c.rotate_bytes, 480);
    assert_int_equal(c.rotate_age_ms, 2000);
    assert_int_equal(c.retain_bytes, 1u << 20);
    assert_int_equal(c.retain_target_bytes, 65536);
    assert_int_equal(c.retain_age_ms, 3600000);
    assert_int_equal(c.retain_segments, 3);
    assert_int_equal(c.min_free, 1u << 30);
    assert_int_equal(c.sync_mode, 1);
    assert_int_equal(c.sync_interval_ms, 250);
    assert_int_equal(c.sync_bytes, 1u << 20);
    assert_int_equal(c.compress, 0);
    assert_int_equal(c.index_interval, 16);
    assert_int_equal(c.store_queue, 8u << 20);
    assert_int_equal(c.quick_start, 1);
    assert_int_equal(c.main_export, 0); /* the last one given */
    tlc_config_fini(&c);
  }
}

static void test_storage_key_errors(void **state) {
  static const struct {
    const char *ini;
    const char *want;
  } cases[] = {
    { "[daemon]\nrotate_bytes = -1\n", "f.ini:2: [daemon] rotate_bytes: expected a number" },
    { "[daemon]\n\nrotate_bytes = 10X\n", "f.ini:3: [daemon] rotate_bytes: expected a number" },
    { "[daemon]\nrotate_age = soon\n", "f.ini:2: [daemon] rotate_age: expected a duration" },
    { "[daemon]\nretain_age = 1000000000h\n", "f.ini:2: [daemon] retain_age: expected a" },
    { "[daemon]\nretain_segments = many\n", "f.ini:2: [daemon] retain_segments:" },
    { "[daemon]\nmin_free = 1T\n", "f.ini:2: [daemon] min_free:" },
    { "[daemon]\nsync = always\n", "f.ini:2: [daemon] sync: expected on_close, never or" },
    { "[daemon]\nsync_bytes = -4k\n", "f.ini:2: [daemon] sync_bytes:" },
    { "[daemon]\ncompress = zstd\n", "f.ini:2: [daemon] compress: expected yes or no" },
    { "[daemon]\nindex_interval = 2000000\n", "f.ini:2: [daemon] index_interval:" },
    { "[daemon]\nstore_queue = 17G\n", "f.ini:2: [daemon] store_queue:" },
    { "[daemon]\nquick_start = perhaps\n", "f.ini:2: [daemon] quick_start:" },
    { "[daemon]\nmain_export = json\n", "f.ini:2: [daemon] main_export: expected text1 or xml" },
    { "[daemon]\nkeep_skipped = 65M\n", "f.ini:2: [daemon] keep_skipped: expected a number" },
  };
  static const struct {
    const char *ini;
    const char *want;
  } invalid[] = {
    { "[daemon]\nrotate_bytes = 0\n", "[daemon] rotate_bytes: must be at least 1" },
    { "[daemon]\nindex_interval = 0\n", "[daemon] index_interval: must be at least 1" },
    { "[daemon]\nstore_queue = 1M\n", "[daemon] store_queue: must be at least max_block" },
    { "[daemon]\nsync = periodic\n", "[daemon] sync: periodic needs sync_interval" },
  };
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tlc_config_t c;
    char err[256] = "";
    assert_int_equal(tlc_config_init(&c), 0);
    assert_true(tlc_config_load_string(&c, cases[i].ini, "f.ini", err, sizeof(err)) < 0);
    if (strstr(err, cases[i].want) == NULL)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
    tlc_config_fini(&c);
  }
  for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
    tlc_config_t c;
    char err[256] = "";
    assert_int_equal(tlc_config_init(&c), 0);
    assert_int_equal(tlc_config_load_string(&c, invalid[i].ini, "f.ini", err, sizeof(err)), 0);
    assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
    if (strstr(err, invalid[i].want) == NULL)
      fail_msg("invalid case %zu: got \"%s\", want \"%s\"", i, err, invalid[i].want);
    tlc_config_fini(&c);
  }
  {
    tlc_config_t c;
    char err[256] = "";
    char *argv[] = { "tlcapd", "--retain-segments", "-2" };
    assert_true(build(&c, 3, argv, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "command line: --retain-segments: expected a number"));
  }
}

static void test_cli_overrides_file(void **state) {
  tlc_config_t c;
  char err[256] = "";
  char path[] = "/tmp/tlc_test_config_XXXXXX";
  int fd = mkstemp(path);
  FILE *f;
  (void)state;
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  fputs("[daemon]\nmax_targets = 10\n[listen a]\nformat = bin11\naddress = 127.0.0.1:1\n"
        "mapping = /a.txt\n",
        f);
  fclose(f);
  {
    char *argv[] = { "tlcapd",   "--config",           path, "--max-targets", "20",
                     "--listen", "a=evlog@127.0.0.1:2" };
    assert_int_equal(build(&c, 7, argv, err, sizeof(err)), 0);
  }
  assert_int_equal(c.max_targets, 20);
  assert_int_equal(c.nsrc, 1);
  assert_int_equal(c.src[0].format, TLC_FMT_EVLOG);
  assert_int_equal(c.src[0].port, 2);
  assert_string_equal(c.src[0].tset.mapping, "/a.txt"); /* kept from the file */
  tlc_config_fini(&c);
  {
    char *argv[] = { "tlcapd", "--config", "/nonexistent/tlcapd.ini" };
    assert_true(build(&c, 3, argv, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "/nonexistent/tlcapd.ini: cannot read"));
  }
  unlink(path);
}

static void test_parsers(void **state) {
  uint64_t ms;
  char host[64];
  uint16_t port;
  (void)state;
  assert_int_equal(tlc_config_parse_duration_ms("1m", &ms), 0);
  assert_int_equal(ms, 60000);
  assert_int_equal(tlc_config_parse_duration_ms("750", &ms), 0);
  assert_int_equal(ms, 750);
  assert_true(tlc_config_parse_duration_ms("1 s", &ms) < 0);
  assert_true(tlc_config_parse_duration_ms("", &ms) < 0);
  assert_int_equal(tlc_config_parse_hostport("[fe80::1]:80", host, sizeof(host), &port), 0);
  assert_string_equal(host, "fe80::1");
  assert_true(tlc_config_parse_hostport("fe80::1:80", host, sizeof(host), &port) < 0);
  assert_true(tlc_config_parse_hostport("h:65536", host, sizeof(host), &port) < 0);
  assert_true(tlc_config_parse_hostport(":80", host, sizeof(host), &port) < 0);
  assert_int_equal(tlc_target_name_valid("a@10.0.0.1#2", 64), 0);
  assert_int_equal(tlc_target_name_valid("[::1]", 64), 0);
  assert_true(tlc_target_name_valid(".hidden", 64) < 0);
  assert_true(tlc_target_name_valid("a/b", 64) < 0);
  assert_true(tlc_target_name_valid("", 64) < 0);
  assert_true(tlc_target_name_valid("abcdef", 5) < 0);
}

/* Values that mean nothing are refused, a config of /dev/zero ends with an error, and
 * --check-config refuses a subscriber address start refuses. */
static void test_meaningless_values_refused(void **state) {
  static const struct {
    const char *ini;
    const char *want;
  } cases[] = {
    { "[daemon]\nmax_block = 0\n", "f.ini:2: [daemon] max_block: expected a number from 64" },
    { "[daemon]\nmax_areas = 0\n", "f.ini:2: [daemon] max_areas: expected a number from 1" },
    { "[daemon]\nmax_contexts = 0\n", "f.ini:2: [daemon] max_contexts: expected a number" },
    { "[daemon]\nwindows = ,,,\n", "f.ini:2: [daemon] windows: expected 1 to 4" },
    { "[daemon]\nwindows =\n", "f.ini:2: [daemon] windows: expected 1 to 4" },
  };
  char path[] = "/tmp/tlc_cfgXXXXXX", err[256];
  tlc_config_t c;
  FILE *f;
  int fd;
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err[0] = '\0';
    assert_int_equal(tlc_config_init(&c), 0);
    assert_true(tlc_config_load_string(&c, cases[i].ini, "f.ini", err, sizeof(err)) < 0);
    if (strstr(err, cases[i].want) == NULL)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
    tlc_config_fini(&c);
  }
  /* an endless file of NULs, and a file past the 1 MiB cap: an error, not a hang */
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_file(&c, "/dev/zero", err, sizeof(err)), TLC_ELIMIT);
  assert_non_null(strstr(err, "/dev/zero:1: a NUL byte"));
  tlc_config_fini(&c);
  fd = mkstemp(path);
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  fputs("[daemon]\n", f);
  for (int i = 0; i < 70000; i++)
    fputs("# comment line\n", f); /* 15 bytes each: 1.05 MB */
  fclose(f);
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_file(&c, path, err, sizeof(err)), TLC_ELIMIT);
  assert_non_null(strstr(err, "larger than 1048576 bytes"));
  tlc_config_fini(&c);
  unlink(path);
  /* --check-config refuses a subscriber address start refuses: one check, in
   * tlc_config_validate, made by both */
  assert_int_equal(tlc_config_init(&c), 0);
  snprintf(c.serve, sizeof(c.serve), "0.0.0.0:7000");
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "serve: 0.0.0.0:7000 is beyond loopback"));
  snprintf(c.serve, sizeof(c.serve), "[::ffff:10.0.0.1]:7000");
  assert_int_equal(tlc_config_validate(&c, err, sizeof(err)), TLC_EINVAL);
  static const char *const ok[] = { "127.0.0.1:7000",          "127.9.9.9:1",    "[::1]:7000",
                                    "[::ffff:127.0.0.1]:7000", "localhost:7000", "" };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    snprintf(c.serve, sizeof(c.serve), "%s", ok[i]);
    if (tlc_config_validate(&c, err, sizeof(err)) != 0)
      fail_msg("%s refused: %s", ok[i], err);
  }
  tlc_config_fini(&c);
}

/* A listener's allow (CIDR) and targets (fnmatch) lists. */
static void test_listener_allow_targets(void **state) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  tlc_config_t c;
  char err[256];
  (void)state;
  memset(&a4, 0, sizeof(a4));
  a4.sin_family = AF_INET;
  inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
  assert_true(tlc_config_allow_match("", &a4));
  assert_true(tlc_config_allow_match("10.0.0.0/8", &a4));
  assert_true(tlc_config_allow_match("127.0.0.1, 10.1.2.0/23", &a4));
  assert_true(tlc_config_allow_match("10.1.2.3", &a4));
  assert_false(tlc_config_allow_match("10.1.2.4", &a4));
  assert_false(tlc_config_allow_match("10.1.0.0/23,::1", &a4));
  assert_true(tlc_config_allow_match("0.0.0.0/0", &a4));
  memset(&a6, 0, sizeof(a6));
  a6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6.sin6_addr); /* v4-mapped: the IPv4 rules */
  assert_true(tlc_config_allow_match("10.0.0.0/8", &a6));
  inet_pton(AF_INET6, "fd00::17", &a6.sin6_addr);
  assert_true(tlc_config_allow_match("fd00::/8", &a6));
  assert_false(tlc_config_allow_match("fe80::/10 10.0.0.0/8", &a6));
  assert_int_equal(tlc_config_allow_check("10.0.0.0/33", err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "\"10.0.0.0/33\" is not an address"));
  assert_int_equal(tlc_config_allow_check("lab.example", err, sizeof(err)), TLC_EINVAL);
  assert_true(tlc_config_targets_match("", "x"));
  assert_true(tlc_config_targets_match("lab-*, board[0-9]", "board7"));
  assert_false(tlc_config_targets_match("lab-*, board[0-9]", "board10"));
  assert_int_equal(tlc_config_init(&c), 0);
  assert_int_equal(tlc_config_load_string(&c,
                                          "[listen lab]\nformat = bin11\naddress = 127.0.0.1:0\n"
                                          "allow = 127.0.0.0/8, ::1\ntargets = lab-*\n",
                                          "f.ini", err, sizeof(err)),
                   0);
  assert_string_equal(c.src[0].allow, "127.0.0.0/8, ::1");
  assert_string_equal(c.src[0].targets, "lab-*");
  tlc_config_fini(&c);
  assert_int_equal(tlc_config_init(&c), 0);
  assert_true(tlc_config_load_string(&c, "[listen lab]\nallow = 300.1.1.1\n", "f.ini", err,
                                     sizeof(err)) < 0);
  assert_non_null(strstr(err, "f.ini:2: [listen lab] allow:"));
  tlc_config_fini(&c);
}

/* Loads `text` from a string (origin "f.ini") or, file = 1, from a temporary file (its path
 * in `path`); the result of the load. */
static int load_text(tlc_config_t *c, const char *text, int file, char *path, char *err,
                     size_t errlen) {
  FILE *f;
  int fd, r;
  if (!file)
    return tlc_config_load_string(c, text, "f.ini", err, errlen);
  strcpy(path, "/tmp/tlc_cfgXXXXXX");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  r = tlc_config_load_file(c, path, err, errlen);
  unlink(path);
  return r;
}

/* inih reads a line into a 200-byte buffer (Debian's libinih: INI_MAX_LINE compiled in). A
 * longer line is refused with file:line, never split: the rest of it was read as another line,
 * a value cut and a key injected ("state_dir = /tmp/ddd...http = 127.0.0.1:18994" set http).
 * A line of exactly 199 bytes is taken whole, and the lines after it keep their numbers. */
static void test_long_lines(void **state) {
  char edge[256], cut[256], text[1024], want[600], path[32] = "f.ini", err[600];
  tlc_config_t c;
  (void)state;
  /* 199 bytes: "state_dir = /tmp/" and 182 x 'e' */
  snprintf(edge, sizeof(edge), "state_dir = /tmp/%s", "");
  memset(edge + strlen(edge), 'e', 199 - strlen(edge));
  edge[199] = '\0';
  /* 221 bytes: what inih's buffer held before "http = ..." began a line of its own */
  snprintf(cut, sizeof(cut), "%.17s", edge);
  memset(cut + 17, 'd', 182);
  snprintf(cut + 199, sizeof(cut) - 199, "http = 127.0.0.1:18994");
  for (int file = 0; file <= 1; file++) {
    err[0] = '\0';
    snprintf(text, sizeof(text), "[daemon]\n%s\nmax_connections = 7\n", edge);
    assert_int_equal(tlc_config_init(&c), 0);
    if (load_text(&c, text, file, path, err, sizeof(err)) != 0)
      fail_msg("a 199-byte line refused: %s", err);
    assert_string_equal(c.state_dir, edge + 12);
    assert_int_equal(c.max_connections, 7);
    tlc_config_fini(&c);

    snprintf(text, sizeof(text), "[daemon]\n%s\nmax_connections = lots\n", edge);
    assert_int_equal(tlc_config_init(&c), 0);
    assert_true(load_text(&c, text, file, path, err, sizeof(err)) < 0);
    snprintf(want, sizeof(want), "%s:3: [daemon] max_connections", path);
    if (strstr(err, want) == NULL)
      fail_msg("after a 199-byte line: got \"%s\", want \"%s\"", err, want);
    tlc_config_fini(&c);

    snprintf(text, sizeof(text), "[daemon]\n%s\nmax_connections = 7\n%s\nlog_level = debug\n", edge,
             cut);
    assert_int_equal(tlc_config_init(&c), 0);
    assert_int_equal(load_text(&c, text, file, path, err, sizeof(err)), TLC_ELIMIT);
    snprintf(want, sizeof(want), "%s:4: line longer than 199 bytes", path);
    if (strstr(err, want) == NULL)
      fail_msg("a 221-byte line: got \"%s\", want \"%s\"", err, want);
    assert_string_equal(c.http, TLC_DEFAULT_HTTP_ADDR); /* nothing injected */
    tlc_config_fini(&c);

    /* the first error is the one reported */
    snprintf(text, sizeof(text), "[daemon]\nmax_connections = lots\n%s\n", cut);
    assert_int_equal(tlc_config_init(&c), 0);
    assert_true(load_text(&c, text, file, path, err, sizeof(err)) < 0);
    snprintf(want, sizeof(want), "%s:2: [daemon] max_connections", path);
    if (strstr(err, want) == NULL)
      fail_msg("an error before a long line: got \"%s\", want \"%s\"", err, want);
    tlc_config_fini(&c);
    strcpy(path, "f.ini");
  }
}

/* The reload rule comes from the settings table: a key whose change needs a restart keeps
 * its running value (and is named), a refused key refuses the whole reload, a live key is
 * taken; the windows (an array) and aliases ("nats" for nats_url) are compared once. */
static void diff_count(void *ud, const char *key, enum tlc_cfg_reload how) {
  char *seen = ud;
  strcat(seen, key);
  strcat(seen, how == TLC_CFG_LIVE ? "=live " : how == TLC_CFG_RESTART ? "=restart " : "=refuse ");
}

static void test_reload_rule(void **state) {
  tlc_config_t a, b;
  char err[600] = "", restart[256], seen[512] = "";
  (void)state;
  tlc_config_init(&a);
  tlc_config_init(&b);
  assert_int_equal(tlc_config_diff(&a, &b, NULL, NULL), 0);
  assert_int_equal(tlc_config_load_string(&a,
                                          "[daemon]\nstate_dir = /tmp/one\nrotate_bytes = 1M\n"
                                          "windows = 1s,5s\nnats_url = nats://a:4222\n",
                                          "a.ini", err, sizeof(err)),
                   0);
  assert_int_equal(tlc_config_load_string(&b,
                                          "[daemon]\nstate_dir = /tmp/two\nrotate_bytes = 2M\n"
                                          "windows = 1s,6s\nnats = nats://b:4222\n"
                                          "log_level = debug\n",
                                          "b.ini", err, sizeof(err)),
                   0);
  assert_int_equal(tlc_config_diff(&a, &b, diff_count, seen), 5);
  assert_string_equal(seen, "state_dir=restart log_level=live windows=live rotate_bytes=live "
                            "nats_url=restart ");
  /* merge: restart keys get the running value back, live keys stay new */
  assert_int_equal(tlc_config_reload_merge(&a, &b, err, sizeof(err), restart, sizeof(restart)), 0);
  assert_string_equal(restart, "state_dir, nats_url");
  assert_string_equal(b.state_dir, "/tmp/one");
  assert_string_equal(b.nats_url, "nats://a:4222");
  assert_int_equal(b.rotate_bytes, 1u << 21);
  assert_int_equal(b.nwindows, 2);
  assert_int_equal(tlc_config_diff(&a, &b, NULL, NULL), 3); /* log_level, windows, rotate_bytes */
  /* a refused key refuses the whole reload and names the change */
  assert_int_equal(
      tlc_config_load_string(&b, "[daemon]\nserve = 127.0.0.1:7999\n", "c.ini", err, sizeof(err)),
      0);
  assert_true(tlc_config_reload_merge(&a, &b, err, sizeof(err), restart, sizeof(restart)) < 0);
  assert_non_null(strstr(err, "serve: address \""));
  assert_non_null(strstr(err, "-> \"127.0.0.1:7999\""));
  tlc_config_fini(&a);
  tlc_config_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_embedded_default),
    cmocka_unit_test(test_ini_all_sections),
    cmocka_unit_test(test_ini_errors_name_line),
    cmocka_unit_test(test_validate_missing),
    cmocka_unit_test(test_budgets),
    cmocka_unit_test(test_cli),
    cmocka_unit_test(test_cli_errors),
    cmocka_unit_test(test_cli_getopt),
    cmocka_unit_test(test_cli_overrides_file),
    cmocka_unit_test(test_parsers),
    cmocka_unit_test(test_storage_keys),
    cmocka_unit_test(test_storage_key_errors),
    cmocka_unit_test(test_meaningless_values_refused),
    cmocka_unit_test(test_listener_allow_targets),
    cmocka_unit_test(test_long_lines),
    cmocka_unit_test(test_reload_rule),
    cmocka_unit_test(test_packed_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
