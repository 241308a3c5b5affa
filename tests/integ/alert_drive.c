/* alert_drive - drives daemon/alert (the Alertmanager client) from a test, on a libuv loop as
 * tlcapd runs it (tests/integ/test_alertmanager.py).
 *
 *   alert_drive URL RESOLVE_MS REPOST_MS TIMEOUT_MS MAX_ALERTS [STATE_DIR [CA_FILE]]
 *
 * Commands on stdin, one a line; each answers one line on stdout:
 *   v BUDGET TARGET AREA CONTEXT STAT VALUE LIMIT OVER START END EPOCH WALL_NS
 *       one violation (CONTEXT "-" = none) -> "ok"
 *   storm N BUDGET TARGET AREA_PREFIX STAT VALUE LIMIT
 *       N violations at once (areas AREA_PREFIX0 .. AREA_PREFIX<N-1>, wall clock now), the
 *       loop blocked meanwhile -> "storm N MAX_NS P99_NS TOTAL_NS": the slowest call, the 99th
 *       percentile, all of them
 *   c   -> the module's stats-dump object, compact JSON on one line
 *   q   -> closes the module (cancelling a request in flight), "closed" once it has, exit 0
 * Exit 1 when tlc_alert_new refuses the options (its message on stderr).
 */
#include "alert/alert.h"
#include "base/json.h"
#include "base/out.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

static uv_loop_t *loop;
static tlc_alert_t *al;
static uv_pipe_t in;
static char line[8192];
static size_t nline;

static int64_t now_ns(int clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

static void log_cb(void *ud, int level, const char *msg) {
  (void)ud;
  fprintf(stderr, "alert_drive: <%d> %s\n", level, msg);
}

static void closed(void *ud) {
  (void)ud;
  printf("closed\n");
  fflush(stdout);
  uv_close((uv_handle_t *)&in, NULL);
}

static void command(char *s) {
  char *argv[16];
  int argc = 0;
  for (char *t = strtok(s, " \t"); t != NULL && argc < 16; t = strtok(NULL, " \t"))
    argv[argc++] = t;
  if (argc == 0)
    return;
  if (strcmp(argv[0], "v") == 0 && argc == 14) {
    tlc_alert_violation_t v;
    memset(&v, 0, sizeof(v));
    v.budget = argv[1];
    v.target = argv[2];
    v.area = argv[3];
    v.context = strcmp(argv[4], "-") == 0 ? "" : argv[4];
    v.stat = argv[5];
    v.value = strtoll(argv[6], NULL, 10);
    v.limit = strtoll(argv[7], NULL, 10);
    v.over = atoi(argv[8]);
    v.start = strtoll(argv[9], NULL, 10);
    v.end = strtoll(argv[10], NULL, 10);
    v.epoch = strtoull(argv[11], NULL, 10);
    v.wall_ns = strtoll(argv[12], NULL, 10);
    (void)argv[13];
    tlc_alert_violation(al, &v);
    printf("ok\n");
  } else if (strcmp(argv[0], "storm") == 0 && argc == 8) {
    long n = atol(argv[1]);
    int64_t worst = 0, t0 = now_ns(CLOCK_MONOTONIC), *lat;
    char area[300];
    if (n <= 0 || n > 10000000 || (lat = malloc((size_t)n * sizeof(*lat))) == NULL) {
      printf("error: bad count\n");
      fflush(stdout);
      return;
    }
    for (long i = 0; i < n; i++) {
      tlc_alert_violation_t v;
      int64_t a, b;
      memset(&v, 0, sizeof(v));
      snprintf(area, sizeof(area), "%s%ld", argv[4], i);
      v.budget = argv[2];
      v.target = argv[3];
      v.area = area;
      v.context = "";
      v.stat = argv[5];
      v.value = strtoll(argv[6], NULL, 10);
      v.limit = strtoll(argv[7], NULL, 10);
      v.over = 1;
      v.start = i * 1000;
      v.end = i * 1000 + v.value;
      v.wall_ns = now_ns(CLOCK_REALTIME);
      a = now_ns(CLOCK_MONOTONIC);
      tlc_alert_violation(al, &v);
      b = now_ns(CLOCK_MONOTONIC);
      lat[i] = b - a;
      if (b - a > worst)
        worst = b - a;
    }
    t0 = now_ns(CLOCK_MONOTONIC) - t0;
    qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
    printf("storm %ld %" PRId64 " %" PRId64 " %" PRId64 "\n", n, worst, lat[(n * 99) / 100], t0);
    free(lat);
  } else if (strcmp(argv[0], "c") == 0) {
    tlc_out_t o;
    tlc_json_w_t w;
    char *txt;
    size_t len;
    tlc_out_init(&o, 0, NULL, NULL);
    tlc_json_w_init(&w, &o, 1);
    tlc_json_w_open(&w, NULL, '{');
    tlc_alert_dump(al, &w);
    tlc_json_w_close(&w, '}');
    txt = tlc_out_take(&o, &len);
    printf("%s\n", txt != NULL ? txt : "{}");
    free(txt);
    tlc_out_fini(&o);
  } else if (strcmp(argv[0], "q") == 0) {
    uv_read_stop((uv_stream_t *)&in);
    tlc_alert_close(al, closed, NULL);
    al = NULL;
    return;
  } else {
    printf("error: bad command\n");
  }
  fflush(stdout);
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *b) {
  static char buf[65536];
  (void)h;
  (void)sz;
  *b = uv_buf_init(buf, sizeof(buf));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  if (n < 0) { /* stdin closed: as q */
    uv_read_stop(s);
    if (al != NULL) {
      tlc_alert_close(al, closed, NULL);
      al = NULL;
    }
    return;
  }
  for (ssize_t i = 0; i < n && al != NULL; i++) {
    if (b->base[i] == '\n') {
      line[nline] = '\0';
      command(line);
      nline = 0;
    } else if (nline + 1 < sizeof(line)) {
      line[nline++] = b->base[i];
    }
  }
}

int main(int argc, char **argv) {
  tlc_alert_opts_t o;
  if (argc < 6) {
    fprintf(stderr, "usage: alert_drive URL RESOLVE_MS REPOST_MS TIMEOUT_MS MAX_ALERTS "
                    "[STATE_DIR [CA_FILE]]\n");
    return 2;
  }
  loop = uv_default_loop();
  memset(&o, 0, sizeof(o));
  o.url = argv[1];
  o.resolve_ms = strtoull(argv[2], NULL, 10);
  o.repost_ms = strtoull(argv[3], NULL, 10);
  o.timeout_ms = strtoull(argv[4], NULL, 10);
  o.max_alerts = strtoull(argv[5], NULL, 10);
  o.state_dir = argc > 6 ? argv[6] : "";
  o.ca_file = argc > 7 ? argv[7] : "";
  o.host = "testhost";
  o.log = log_cb;
  if (tlc_alert_new(&al, loop, &o) != 0)
    return 1;
  uv_pipe_init(loop, &in, 0);
  uv_pipe_open(&in, 0);
  uv_read_start((uv_stream_t *)&in, alloc_cb, read_cb);
  printf("ready\n");
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  return 0;
}
