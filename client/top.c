/* top.c - `tlcap top [TARGET] [--interval MS]`: a live terminal view of a target's areas (one
 * line per area), drawn with plain ANSI escapes on the alternate screen (works in tmux) and
 * redrawn on every snapshot and key, at least once a second. It subscribes to the columns it
 * shows only (top_columns) and keeps the tables in live.c's view. stdin is raw while it runs and
 * restored at exit; when stdin is not a terminal and ends, it goes on with the socket only. It
 * outlives a daemon restart: the link's state is a status line under the header, and the view
 * of a restarted daemon starts again.
 */
#include "cli.h"

#include "convert.h"
#include "mapping.h"
#include "stats.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char g_link[256]; /* the link's state after a loss ("" while it never dropped) */
static int g_view_reset; /* the daemon restarted; drop the old view */

enum { SORT_NET, SORT_COUNT, SORT_CALL, SORT_MAX, SORT_AVG, SORT_NAME, NSORT };
static const char *const sort_names[NSORT] = { "net", "count", "call", "max", "avg", "name" };

typedef struct top_row {
  const tlc_stat_t *r;
  char name[96];
  int64_t net, call, max, avg;
  uint64_t count;
} top_row_t;

static int g_sort;

static int cmp_top(const void *a, const void *b) {
  const top_row_t *x = a, *y = b;
  int64_t vx = 0, vy = 0;
  switch (g_sort) {
  case SORT_NAME:
    return strcmp(x->name, y->name);
  case SORT_COUNT:
    vx = (int64_t)x->count;
    vy = (int64_t)y->count;
    break;
  case SORT_CALL:
    vx = x->call;
    vy = y->call;
    break;
  case SORT_MAX:
    vx = x->max;
    vy = y->max;
    break;
  case SORT_AVG:
    vx = x->avg;
    vy = y->avg;
    break;
  default:
    vx = x->net;
    vy = y->net;
  }
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return strcmp(x->name, y->name);
}

static void fmt_ns(char *buf, size_t len, int64_t ns) {
  double v = (double)ns;
  if (ns < 0)
    snprintf(buf, len, "-");
  else if (v < 1e3)
    snprintf(buf, len, "%dns", (int)ns); /* < 1000: fits; keeps -Wformat-truncation quiet at -O2 */
  else if (v < 1e6)
    snprintf(buf, len, "%.1fus", v / 1e3);
  else if (v < 1e9)
    snprintf(buf, len, "%.1fms", v / 1e6);
  else
    snprintf(buf, len, "%.2fs", v / 1e9);
}

typedef struct top_state {
  int window;    /* 0 cumulative, 1.. window index + 1 */
  uint32_t nwin; /* the shown target's rolling windows: w cycles through them and back */
  char filter[64];
  int editing;
  size_t cur; /* target index in view */
  const char *only;
  size_t first; /* scrolling: the first area row shown */
  size_t page;  /* area rows the last draw had room for (PgUp/PgDn step) */
  int esc;      /* escape sequence state: 1 after ESC, 2 after ESC [, 3 after ESC [ 5/6 */
  int esc_pg;   /* ESC [ 5 (page up) or 6 (page down) awaiting its '~' */
} top_state_t;

static void top_draw(tlc_cli_view_t *w, top_state_t *ts, const char *addr) {
  struct winsize ws;
  int rows = 24, cols = 100, line = 0;
  tlc_cli_view_target_t *vt = w->n > 0 ? &w->v[ts->cur % w->n] : NULL;
  top_row_t *tr = NULL;
  size_t n = 0, i;
  char wname[32], b1[16], b2[16], b3[16], b4[16];
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
    rows = ws.ws_row;
    cols = ws.ws_col;
  }
  printf("\x1b[H");
  if (vt == NULL) {
    printf("tlcap top - %s - waiting for statistics%s\x1b[K\r\n", addr,
           ts->only != NULL ? " of the target" : "");
    if (g_link[0])
      printf("link: %s\x1b[K\r\n", g_link);
    printf("\x1b[J");
    fflush(stdout);
    return;
  }
  ts->nwin = vt->t.nwindows;
  if ((uint32_t)ts->window > vt->t.nwindows)
    ts->window = 0; /* another target with fewer windows */
  if (ts->window == 0)
    snprintf(wname, sizeof(wname), "cumulative");
  else
    snprintf(wname, sizeof(wname), "last %.0fs", (double)vt->t.window_ns[ts->window - 1] / 1e9);
  printf("tlcap top - %s - target %s (%zu/%zu) %s - %s - sort %s%s%s\x1b[K\r\n", addr, vt->name,
         ts->cur % w->n + 1, w->n, vt->connected ? "connected" : "DISCONNECTED", wname,
         sort_names[g_sort], ts->filter[0] ? " - filter " : "", ts->filter);
  printf("events %llu  bytes %llu  gaps %llu  resyncs %llu  skipped %llu  invalid %llu  "
         "anomalies %llu  area-limit drops %llu  my drops %llu  seq gaps %llu\x1b[K\r\n",
         (unsigned long long)vt->t.counters.events, (unsigned long long)vt->t.counters.bytes,
         (unsigned long long)vt->t.counters.gaps, (unsigned long long)vt->t.counters.resyncs,
         (unsigned long long)vt->t.counters.bytes_skipped,
         (unsigned long long)vt->t.counters.records_invalid,
         (unsigned long long)vt->t.counters.anomalies,
         (unsigned long long)vt->t.counters.dropped_area_limit,
         (unsigned long long)w->dropped_events, (unsigned long long)vt->gaps_seen);
  line = 3;
  if (g_link[0]) {
    printf("link: %s\x1b[K\r\n", g_link);
    line++;
  }
  printf("\x1b[7m%-40s %-12s %10s %10s %10s %10s %10s\x1b[0m\x1b[K\r\n", "AREA", "CONTEXT", "COUNT",
         "T.NET", "T.CALL", "NET.MAX", "NET.AVG");
  tr = vt->t.nrows > 0 ? tlc_malloc(vt->t.nrows * sizeof(*tr)) : NULL;
  for (i = 0; tr != NULL && i < vt->t.nrows; i++) {
    const tlc_stat_t *r = &vt->t.rows[i];
    const tlc_map_area_t *ma = vt->have_map ? tlc_mapping_find(&vt->map, r->handle) : NULL;
    top_row_t *x = &tr[n];
    if (vt->t.ncontexts > 1 && r->kind == TLC_ROW_CODE && r->context != TLC_CTX_NEUTRAL)
      continue; /* with several contexts, one line per area: its Neutral row */
    x->r = r;
    if (ma != NULL && ma->name[0] != 0)
      snprintf(x->name, sizeof(x->name), "%s", ma->name);
    else
      snprintf(x->name, sizeof(x->name), "%08X", r->handle);
    if (r->kind == TLC_ROW_STATE) {
      size_t l = strlen(x->name);
      snprintf(x->name + l, sizeof(x->name) - l, "=%llX", (unsigned long long)r->state);
    }
    if (ts->filter[0] != 0 && strstr(x->name, ts->filter) == NULL)
      continue;
    if (ts->window > 0 && (uint32_t)(ts->window - 1) < r->nwin) {
      const tlc_wstat_t *wsx = &r->win[ts->window - 1];
      x->count = wsx->count;
      /* what does not apply prints "-", as in the cumulative view (it printed 0ns here) */
      x->net = r->kind == TLC_ROW_DATA ? -1 : wsx->k[TLC_NET].sum;
      x->call = r->kind == TLC_ROW_CODE ? wsx->k[TLC_CALL].sum : -1;
      x->max = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].max : -1;
      x->avg = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].sum / (int64_t)wsx->k[TLC_NET].n : -1;
    } else {
      x->count = r->count;
      x->net = r->kind == TLC_ROW_DATA ? -1 : r->total[TLC_NET];
      x->call = r->kind == TLC_ROW_CODE ? r->total[TLC_CALL] : -1;
      x->max = r->dist[TLC_NET].n > 0 ? r->dist[TLC_NET].max : -1;
      x->avg = r->dist[TLC_NET].n > 0 ? tlc_dist_avg(&r->dist[TLC_NET]) : -1;
    }
    n++;
  }
  if (n > 0)
    qsort(tr, n, sizeof(*tr), cmp_top);
  /* scrolling (j/k, arrows, PgUp/PgDn, g/G): the rows that fit below the header */
  ts->page = rows - 1 > line ? (size_t)(rows - 1 - line) : 1;
  if (ts->first + ts->page > n)
    ts->first = n > ts->page ? n - ts->page : 0;
  for (i = ts->first; i < n && line < rows - 1; i++, line++) {
    char ctx[32];
    tlc_ctx_name(&vt->t, tr[i].r->context, ctx, sizeof(ctx));
    if (tr[i].r->context == TLC_CTX_NONE)
      snprintf(ctx, sizeof(ctx), "-");
    fmt_ns(b1, sizeof(b1), tr[i].net);
    fmt_ns(b2, sizeof(b2), tr[i].call);
    fmt_ns(b3, sizeof(b3), tr[i].max);
    fmt_ns(b4, sizeof(b4), tr[i].avg);
    printf("%-40.40s %-12.12s %10llu %10s %10s %10s %10s\x1b[K\r\n", tr[i].name, ctx,
           (unsigned long long)tr[i].count, b1, b2, b3, b4);
  }
  tlc_free(tr);
  if (ts->editing)
    printf("\x1b[%d;1Hfilter: %s\x1b[K", rows, ts->filter);
  else
    printf("\x1b[J\x1b[%d;1H\x1b[7mq quit  s sort  w window  / filter  t target  j/k PgUp/PgDn "
           "scroll - areas %zu-%zu of %zu\x1b[0m\x1b[K",
           rows, n > 0 ? ts->first + 1 : 0, i, n);
  (void)cols;
  fflush(stdout);
}

/* Handles one key; returns 1 to quit. */
static int top_key(top_state_t *ts, int ch) {
  if (ts->editing) {
    size_t l = strlen(ts->filter);
    if (ch == '\r' || ch == '\n' || ch == 27)
      ts->editing = 0;
    else if ((ch == 127 || ch == 8) && l > 0)
      ts->filter[l - 1] = 0;
    else if (isprint(ch) && l + 1 < sizeof(ts->filter)) {
      ts->filter[l] = (char)ch;
      ts->filter[l + 1] = 0;
    }
    return 0;
  }
  /* arrows and page keys arrive as ESC [ A / B / 5~ / 6~ */
  if (ts->esc == 1) {
    ts->esc = ch == '[' ? 2 : 0;
    return 0;
  }
  if (ts->esc == 2) {
    ts->esc = 0;
    if (ch == 'A')
      ch = 'k';
    else if (ch == 'B')
      ch = 'j';
    else if (ch == '5' || ch == '6') {
      ts->esc = 3;
      ts->esc_pg = ch;
      return 0;
    } else
      return 0;
  } else if (ts->esc == 3) {
    ts->esc = 0;
    if (ch != '~')
      return 0;
    ch = ts->esc_pg == '5' ? 'b' : ' ';
  }
  switch (ch) {
  case 27:
    ts->esc = 1;
    break;
  case 'j':
    ts->first++;
    break;
  case 'k':
    if (ts->first > 0)
      ts->first--;
    break;
  case ' ':
    ts->first += ts->page > 1 ? ts->page - 1 : 1;
    break;
  case 'b':
    ts->first = ts->first > ts->page ? ts->first - (ts->page > 1 ? ts->page - 1 : 1) : 0;
    break;
  case 'g':
    ts->first = 0;
    break;
  case 'G':
    ts->first = (size_t)-1 / 2; /* clamped to the last page by the next draw */
    break;
  case 'q':
  case 'Q':
  case 3:
    return 1;
  case 's':
    g_sort = (g_sort + 1) % NSORT;
    break;
  case 'w':
    ts->window = (int)(((uint32_t)ts->window + 1) % (ts->nwin + 1));
    break;
  case '/':
    ts->editing = 1;
    ts->filter[0] = 0;
    break;
  case 't':
    ts->cur++;
    break;
  default:
    break;
  }
  return 0;
}

static struct termios g_saved_tio;
static int g_tio_saved;

static void term_restore(void) {
  if (g_tio_saved)
    tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_tio);
  g_tio_saved = 0;
}

/* The columns `tlcap top` subscribes to: those top_draw reads. */
static size_t top_columns(uint32_t *c) {
  size_t n = 0;
  unsigned w;
  c[n++] = TLC_COL_COUNT;
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_TOTAL);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_N);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_SUM);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_MAX);
  c[n++] = TLC_COL_DIST(TLC_CALL, TLC_COLF_TOTAL);
  for (w = 0; w < TLC_MAX_WINDOWS; w++) {
    c[n++] = TLC_COL_WCOUNT(w);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_N);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_SUM);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_MAX);
    c[n++] = TLC_COL_WIN(w, TLC_CALL, TLC_COLW_SUM);
  }
  return n;
}

/* top: the link's state goes in a status line under the header (top_draw). */
static void top_event_cb(void *ud, const tlc_client_event_t *ev) {
  time_t now = time(NULL);
  struct tm tm;
  char at[16];
  (void)ud;
  localtime_r(&now, &tm);
  strftime(at, sizeof(at), "%H:%M:%S", &tm);
  switch (ev->kind) {
  case TLC_CLIENT_EV_LOST:
    snprintf(g_link, sizeof(g_link), "DISCONNECTED at %s (%s): reconnecting", at, ev->reason);
    break;
  case TLC_CLIENT_EV_RETRY:
    snprintf(g_link, sizeof(g_link), "DISCONNECTED: reconnecting, attempt %u failed (%.120s)",
             ev->attempts, ev->reason);
    break;
  case TLC_CLIENT_EV_RECONNECTED:
    snprintf(g_link, sizeof(g_link), "reconnected at %s after %.1f s%s", at,
             (double)ev->down_ms / 1000.0,
             ev->restarted ? ": the daemon restarted, view reloaded from its statistics" : "");
    if (ev->restarted)
      g_view_reset = 1;
    break;
  default:
    break;
  }
}

int tlc_cli_top(int argc, char **argv) {
  Tlcap__Subscribe sub = TLCAP__SUBSCRIBE__INIT;
  uint32_t top_cols[6 + 5 * TLC_MAX_WINDOWS];
  char *targets[1];
  tlc_client_t *c;
  tlc_cli_view_t w;
  top_state_t ts;
  long interval = 1000;
  int status = 0, tty = isatty(STDIN_FILENO), quit = 0, stdin_eof = 0, wait = 0, o;
  static const struct option lo[] = { { "interval", required_argument, NULL, 'i' },
                                      { "wait", no_argument, NULL, 'W' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  memset(&ts, 0, sizeof(ts));
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":hi:", lo)) != -1) {
    if (o == 'i') {
      interval = strtol(optarg, NULL, 10);
      continue;
    }
    if (o == 'W') {
      wait = 1;
      continue;
    }
    if (o != 'h')
      return EXIT_USAGE;
    printf("usage: tlcap [--connect ADDR] top [TARGET] [--interval MS] [--wait]\n"
           "A live view of a target's areas, sorted by net time, redrawn in place.\n"
           "Keys: q quit, s next sort key (net, count, call, max, avg, name), w next window\n"
           "(cumulative, then each rolling window), / filter by name (Enter ends), t next\n"
           "target, j/k or the arrows scroll a row, PgDn/PgUp (space/b) a page, g/G to the\n"
           "first/last rows. The header shows the target's counters, area-limit drops, this\n"
           "view's dropped events and detected sequence gaps.\n"
           "A TARGET the daemon does not know is an error; with --wait, top waits for it.\n");
    return 0;
  }
  if (tlc_cli_operands(argc, 0, 1, "tlcap top [TARGET] [--interval MS] [--wait]") < 0)
    return EXIT_USAGE;
  if (interval <= 0) {
    fprintf(stderr, "tlcap top: --interval must be a positive number of ms\n");
    return EXIT_USAGE;
  }
  if (optind < argc)
    ts.only = argv[optind];
  if ((c = tlc_cli_connect_ev("tlcap top", &status, top_event_cb)) == NULL)
    return status;
  if (ts.only != NULL && !wait && (status = tlc_cli_not_known("top", c, ts.only)) != 0) {
    tlc_client_free(c);
    return status;
  }
  memset(&w, 0, sizeof(w));
  if (ts.only != NULL) {
    targets[0] = (char *)ts.only;
    sub.targets = targets;
    sub.n_targets = 1;
  }
  sub.interval_ms = (uint32_t)interval;
  /* Only what the view shows (docs/protocol.md "Columnar rows"): one line per area (Neutral
   * rows when there are several contexts), COUNT, T.NET, T.CALL, NET max and avg, for the
   * cumulative statistics and each rolling window. windows and neutral are set too, for a
   * daemon older than columnar rows (it ignores the columns and sends every field). */
  sub.columns = top_cols;
  sub.n_columns = top_columns(top_cols);
  sub.neutral_only = 1;
  sub.windows = 1;
  sub.neutral = 1;
  sub.names = 1;
  if (tlc_client_subscribe(c, &sub) < 0) {
    fprintf(stderr, "tlcap: %s: subscribe failed\n", tlc_client_addr(c));
    tlc_client_free(c);
    return EXIT_BAD;
  }
  if (tty && tcgetattr(STDIN_FILENO, &g_saved_tio) == 0) {
    struct termios raw = g_saved_tio;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    g_tio_saved = 1;
    atexit(term_restore);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  /* a frame goes out in one write, at top_draw's fflush: a terminal never shows it half drawn
   * (line buffering wrote the header and each row apart) */
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  printf("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
  top_draw(&w, &ts, tlc_client_addr(c));
  while (!tlc_cli_stop && !quit) {
    struct pollfd pf[2];
    int np = 1;
    pf[0].fd = tlc_client_fd(c);
    pf[0].events = POLLIN;
    pf[0].revents = 0;
    if (!stdin_eof) {
      pf[1].fd = STDIN_FILENO;
      pf[1].events = POLLIN;
      pf[1].revents = 0;
      np = 2;
    }
    if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
      break;
    if (np == 2 && (pf[1].revents & (POLLIN | POLLHUP))) {
      char kb[64];
      ssize_t k = read(STDIN_FILENO, kb, sizeof(kb)), j;
      for (j = 0; j < k && !quit; j++)
        quit = top_key(&ts, (unsigned char)kb[j]);
      if (k <= 0 && !tty)
        stdin_eof = 1; /* stdin closed (not a terminal): keep running on the socket only */
      top_draw(&w, &ts, tlc_client_addr(c));
    }
    for (;;) {
      Tlcap__ServerMessage *m;
      int r = tlc_client_recv(c, 0, &m);
      if (r == 0)
        break;
      if (g_view_reset) {
        tlc_cli_view_fini(&w); /* a restarted daemon: the old targets and rows are gone */
        g_view_reset = 0;
      }
      if (r < 0) {
        /* the library reconnects by itself: what comes here cannot be cured by waiting */
        term_restore();
        printf("\x1b[?25h\x1b[?1049l");
        fprintf(stderr, "tlcap top: %s: %s\n", tlc_client_addr(c),
                tlc_client_last_error(c)[0] ? tlc_client_last_error(c) : tlc_strerror(r));
        status = EXIT_BAD;
        quit = 1;
        break;
      }
      if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT)
        tlc_cli_view_apply(&w, m->snapshot);
      else if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_DROPPED) {
        w.dropped_batches = m->dropped->total_batches;
        w.dropped_events = m->dropped->total_events;
      }
      tlc_client_msg_free(m);
    }
    if (!quit)
      top_draw(&w, &ts, tlc_client_addr(c));
  }
  if (status == 0) {
    term_restore();
    printf("\x1b[?25h\x1b[?1049l");
    fflush(stdout);
  }
  tlc_cli_view_fini(&w);
  tlc_client_free(c);
  return status;
}
