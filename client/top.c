/* top.c - `tlcap top [TARGET] [--interval MS]`: a live terminal view of a target's areas (one
 * line per area), drawn with plain ANSI escapes on the alternate screen (works in tmux) and
 * redrawn on every snapshot and key, at least once a second. It subscribes to the columns it
 * shows only (top_columns) and keeps the tables in live.c's view. stdin is raw while it runs and
 * restored at exit; when stdin is not a terminal and ends, it goes on with the socket only. It
 * outlives a daemon restart: the link's state is a status line under the header, and the view
 * is reloaded from the restarted daemon. Every line is cut to the terminal's width (a wrapped
 * line would scroll the header away); the columns drop by priority as the terminal narrows.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "proto/convert.h"

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

enum { SORT_NET, SORT_COUNT, SORT_CALL, SORT_MAX, SORT_AVG, SORT_P99, SORT_NAME, NSORT };
static const char *const sort_names[NSORT] = {
  "net", "count", "call", "max", "avg", "p99", "name"
};

typedef struct top_row {
  const tlc_stat_t *r;
  char name[128];
  int64_t net, call, max, avg, p99; /* -1: does not apply or not known ("-") */
  tlc_at_t max_at;                  /* when NET.MAX's sample was taken (known 0: "-") */
  uint64_t count;
  double pct; /* share of the view's span, -1 when it does not apply */
} top_row_t;

static int g_sort;

static int64_t sort_key(const top_row_t *x) {
  switch (g_sort) {
  case SORT_COUNT:
    return (int64_t)x->count;
  case SORT_CALL:
    return x->call;
  case SORT_MAX:
    return x->max;
  case SORT_AVG:
    return x->avg;
  case SORT_P99:
    return x->p99;
  default:
    return x->net;
  }
}

static int cmp_top(const void *a, const void *b) {
  const top_row_t *x = a, *y = b;
  int64_t vx, vy;
  if (g_sort == SORT_NAME)
    return strcmp(x->name, y->name);
  vx = sort_key(x);
  vy = sort_key(y);
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

/* A count in at most 7 characters: 1234567, then 12.3M, 1.23G. */
static void fmt_count(char *buf, size_t len, uint64_t v) {
  if (v < 10000000u)
    snprintf(buf, len, "%llu", (unsigned long long)v);
  else if (v < 10000000000ull)
    snprintf(buf, len, "%.1fM", (double)v / 1e6);
  else
    snprintf(buf, len, "%.2fG", (double)v / 1e9);
}

/* The area columns after AREA, in the order shown. Each has a priority: as the terminal
 * narrows, the columns of the highest priority number go first, so that AREA keeps at least
 * AREA_MIN characters (80 columns drop T.CALL; 64 also P99 and NET.MAX). With MAX AT shown
 * (key x), prio_at applies instead: NET.MAX and its time stay, the others go first (80 columns
 * keep %, T.NET, NET.MAX and MAX AT when the times have at most 13 digits). */
enum { COL_PCT, COL_COUNT, COL_NET, COL_AVG, COL_MAX, COL_P99, COL_CALL, COL_AT, NCOLS };
static const struct {
  const char *head;
  int width, prio, prio_at;
} g_cols[NCOLS] = { { "%", 6, 0, 2 },       { "COUNT", 8, 1, 3 },   { "T.NET", 9, 0, 1 },
                    { "NET.AVG", 9, 2, 4 }, { "NET.MAX", 9, 4, 0 }, { "P99", 9, 3, 5 },
                    { "T.CALL", 9, 5, 6 },  { "MAX AT", 0, 0, 0 } };
#define AREA_MIN 20
#define AREA_MAX 64
#define AT_MAX   40 /* tlc_at_text's longest: two 20-character numbers are cut here */

typedef struct top_state {
  int window;    /* 0 cumulative, 1.. window index + 1 */
  uint32_t nwin; /* the shown target's rolling windows: w cycles through them and back */
  size_t ctx;    /* 0: every area (Neutral rows with several contexts); k: context k - 1 only */
  size_t nctx;   /* the shown target's contexts: c cycles through them and back */
  char filter[64];
  int editing;
  size_t cur; /* target index in view */
  const char *only;
  size_t first; /* scrolling: the first area row shown */
  size_t page;  /* area rows the last draw had room for (PgUp/PgDn step) */
  int esc;      /* escape sequence state: 1 after ESC, 2 after ESC [, 3 after ESC [ 5/6 */
  int esc_pg;   /* ESC [ 5 (page up) or 6 (page down) awaiting its '~' */
  int at;       /* x: the MAX AT column (when NET.MAX's sample was taken) is shown */
} top_state_t;

/* Prints one screen line cut to the terminal's width (never wrapped: a wrapped line scrolls
 * the header away), in reverse video when `rev`. */
static void put_line(const char *text, int cols, int rev) {
  printf("%s%.*s%s\x1b[K\r\n", rev ? "\x1b[7m" : "", cols > 1 ? cols - 1 : 1, text,
         rev ? "\x1b[0m" : "");
}

/* A row's name: the mapping's, else the handle; a state row as VARIABLE = VALUE NAME (the
 * variable's name and the value's, each the number when the mapping has no name for it). */
static void row_name(const tlc_cli_view_target_t *vt, const tlc_stat_t *r, char *buf, size_t len) {
  const tlc_mapping_t *m = vt->have_map ? &vt->map : NULL;
  const tlc_map_area_t *ma = m != NULL ? tlc_mapping_find(m, r->handle) : NULL;
  if (r->kind == TLC_ROW_STATE) {
    (void)tlc_mapping_state_display(m, r->handle, r->state, buf, len);
  } else if (ma != NULL && ma->name[0] != 0)
    snprintf(buf, len, "%s", ma->name);
  else
    snprintf(buf, len, "%08X", r->handle);
}

/* Whether row r belongs to the view: context view k shows that context's code rows; the
 * combined view every area once (its Neutral row when the target has several contexts). */
static int in_view(const tlc_table_t *t, const top_state_t *ts, const tlc_stat_t *r) {
  if (ts->ctx > 0)
    return r->kind == TLC_ROW_CODE && r->context == ts->ctx - 1;
  return !(t->ncontexts > 1 && r->kind == TLC_ROW_CODE && r->context != TLC_CTX_NEUTRAL);
}

static void row_values(const tlc_table_t *t, const top_state_t *ts, top_row_t *x) {
  const tlc_stat_t *r = x->r;
  int64_t span = tlc_table_total_time(t);
  if (ts->window > 0 && (uint32_t)(ts->window - 1) < r->nwin) {
    const tlc_wstat_t *wsx = &r->win[ts->window - 1];
    int64_t wn = t->window_ns[ts->window - 1];
    span = span < wn ? span : wn;
    x->count = wsx->count;
    /* what does not apply prints "-", as in the cumulative view */
    x->net = r->kind == TLC_ROW_DATA ? -1 : wsx->k[TLC_NET].sum;
    x->call = r->kind == TLC_ROW_CODE ? wsx->k[TLC_CALL].sum : -1;
    x->max = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].max : -1;
    x->avg = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].sum / (int64_t)wsx->k[TLC_NET].n : -1;
    x->p99 = -1;                              /* windows keep no quantiles */
    memset(&x->max_at, 0, sizeof(x->max_at)); /* nor extremes' times */
  } else {
    x->count = r->count;
    x->net = r->kind == TLC_ROW_DATA ? -1 : r->total[TLC_NET];
    x->call = r->kind == TLC_ROW_CODE ? r->total[TLC_CALL] : -1;
    x->max = r->dist[TLC_NET].n > 0 ? r->dist[TLC_NET].max : -1;
    x->avg = r->dist[TLC_NET].n > 0 ? tlc_dist_avg(&r->dist[TLC_NET]) : -1;
    x->p99 = r->dist[TLC_NET].n > 0 && r->dist[TLC_NET].has_q ? r->dist[TLC_NET].q[2] : -1;
    if (r->dist[TLC_NET].n > 0)
      x->max_at = r->dist[TLC_NET].max_at;
    else
      memset(&x->max_at, 0, sizeof(x->max_at));
  }
  x->pct = x->net >= 0 && span > 0 ? 100.0 * (double)x->net / (double)span : -1;
}

/* Which columns fit in `cols` (shown[]; widths in width[]), and AREA's width. at_w: MAX AT's
 * width (its longest text), 0 when it is not shown; it is cut to what the terminal leaves
 * beside AREA_MIN and NET.MAX. */
static int layout(int cols, int at_w, int shown[NCOLS], int width[NCOLS]) {
  int used = 0, c, p, area;
  if (at_w > 0) {
    int room = cols - 1 - AREA_MIN - (1 + g_cols[COL_MAX].width) - 1;
    at_w = at_w < AT_MAX ? at_w : AT_MAX;
    at_w = at_w < room ? at_w : room > 1 ? room : 1;
  }
  for (c = 0; c < NCOLS; c++) {
    width[c] = c == COL_AT ? at_w : g_cols[c].width;
    shown[c] = c != COL_AT || at_w > 0;
    if (shown[c])
      used += 1 + width[c];
  }
  for (p = 6; p > 0 && cols - 1 - used < AREA_MIN; p--)
    for (c = 0; c < NCOLS; c++)
      if (shown[c] && (at_w > 0 ? g_cols[c].prio_at : g_cols[c].prio) == p) {
        shown[c] = 0;
        used -= 1 + width[c];
      }
  area = cols - 1 - used;
  return area < AREA_MIN ? AREA_MIN : area > AREA_MAX ? AREA_MAX : area;
}

static void top_draw(tlc_cli_view_t *w, top_state_t *ts, const char *addr) {
  struct winsize ws;
  int rows = 24, cols = 80, line = 0, shown[NCOLS], width[NCOLS], aw, c, at_w = 0;
  tlc_cli_view_target_t *vt = w->n > 0 ? &w->v[ts->cur % w->n] : NULL;
  top_row_t *tr = NULL;
  size_t n = 0, i;
  char wname[32], cname[64], text[1024], cell[NCOLS][AT_MAX + 8];
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
    rows = ws.ws_row;
    cols = ws.ws_col;
  }
  if (cols > (int)sizeof(text))
    cols = (int)sizeof(text);
  printf("\x1b[H");
  if (vt == NULL) {
    snprintf(text, sizeof(text), "tlcap top - %s - waiting for statistics%s", addr,
             ts->only != NULL ? " of the target" : "");
    put_line(text, cols, 0);
    if (g_link[0]) {
      snprintf(text, sizeof(text), "link: %s", g_link);
      put_line(text, cols, 0);
    }
    printf("\x1b[J");
    fflush(stdout);
    return;
  }
  ts->nwin = vt->t.nwindows;
  if ((uint32_t)ts->window > vt->t.nwindows)
    ts->window = 0; /* another target with fewer windows */
  ts->nctx = vt->t.ncontexts > 1 ? vt->t.ncontexts : 0;
  if (ts->ctx > ts->nctx)
    ts->ctx = 0; /* another target with fewer contexts */
  if (ts->window == 0)
    snprintf(wname, sizeof(wname), "cumulative");
  else
    snprintf(wname, sizeof(wname), "last %.0fs", (double)vt->t.window_ns[ts->window - 1] / 1e9);
  if (ts->ctx == 0 && vt->t.ncontexts != 1)
    snprintf(cname, sizeof(cname), "all contexts");
  else {
    char cb[48];
    snprintf(cname, sizeof(cname), "%s",
             tlc_mapping_ctx_display(vt->have_map ? &vt->map : NULL, &vt->t,
                                     (uint32_t)(ts->ctx > 0 ? ts->ctx - 1 : 0), cb, sizeof(cb)));
  }
  snprintf(text, sizeof(text), "tlcap top - target %s %s (%zu/%zu) - %s - %s - sort %s%s%s - %s",
           vt->name, vt->connected ? "connected" : "DISCONNECTED", ts->cur % w->n + 1, w->n, cname,
           wname, sort_names[g_sort], ts->filter[0] ? " - filter " : "", ts->filter, addr);
  put_line(text, cols, 0);
  snprintf(
      text, sizeof(text),
      "events %llu  gaps %llu  resyncs %llu  skipped %llu  invalid %llu  anomalies %llu  "
      "area-limit drops %llu  my drops %llu  seq gaps %llu  bytes %llu",
      (unsigned long long)vt->t.counters.events, (unsigned long long)vt->t.counters.gaps,
      (unsigned long long)vt->t.counters.resyncs, (unsigned long long)vt->t.counters.bytes_skipped,
      (unsigned long long)vt->t.counters.records_invalid,
      (unsigned long long)vt->t.counters.anomalies,
      (unsigned long long)vt->t.counters.dropped_area_limit, (unsigned long long)w->dropped_events,
      (unsigned long long)vt->gaps_seen, (unsigned long long)vt->t.counters.bytes);
  put_line(text, cols, 0);
  line = 2;
  if (g_link[0]) {
    snprintf(text, sizeof(text), "link: %s", g_link);
    put_line(text, cols, 0);
    line++;
  }
  tr = vt->t.nrows > 0 ? tlc_malloc(vt->t.nrows * sizeof(*tr)) : NULL;
  for (i = 0; tr != NULL && i < vt->t.nrows; i++) {
    top_row_t *x = &tr[n];
    if (!in_view(&vt->t, ts, &vt->t.rows[i]))
      continue;
    x->r = &vt->t.rows[i];
    row_name(vt, x->r, x->name, sizeof(x->name));
    if (ts->filter[0] != 0 && strstr(x->name, ts->filter) == NULL)
      continue;
    row_values(&vt->t, ts, x);
    n++;
  }
  if (n > 0)
    qsort(tr, n, sizeof(*tr), cmp_top);
  /* scrolling (j/k, arrows, PgUp/PgDn, g/G): the rows that fit below the column heads */
  ts->page = rows - 2 > line ? (size_t)(rows - 2 - line) : 1;
  if (ts->first + ts->page > n)
    ts->first = n > ts->page ? n - ts->page : 0;
  if (ts->at) { /* MAX AT as wide as the longest time on this page */
    at_w = (int)strlen(g_cols[COL_AT].head);
    for (i = ts->first; i < n && i < ts->first + ts->page; i++) {
      int l = (int)strlen(tlc_at_text(&tr[i].max_at, cell[COL_AT], sizeof(cell[0])));
      at_w = l > at_w ? l : at_w;
    }
  }
  aw = layout(cols, at_w, shown, width);
  {
    int k = snprintf(text, sizeof(text), "%-*s", aw, "AREA");
    for (c = 0; c < NCOLS; c++)
      if (shown[c] && k >= 0 && (size_t)k < sizeof(text))
        k += snprintf(text + k, sizeof(text) - (size_t)k, c == COL_AT ? " %-*s" : " %*s", width[c],
                      g_cols[c].head);
  }
  put_line(text, cols, 1);
  line++;
  for (i = ts->first; i < n && line < rows - 1; i++, line++) {
    int k;
    if (tr[i].pct < 0)
      snprintf(cell[COL_PCT], sizeof(cell[0]), "-");
    else
      snprintf(cell[COL_PCT], sizeof(cell[0]), "%.1f", tr[i].pct < 9999 ? tr[i].pct : 9999.0);
    fmt_count(cell[COL_COUNT], sizeof(cell[0]), tr[i].count);
    fmt_ns(cell[COL_NET], sizeof(cell[0]), tr[i].net);
    fmt_ns(cell[COL_AVG], sizeof(cell[0]), tr[i].avg);
    fmt_ns(cell[COL_MAX], sizeof(cell[0]), tr[i].max);
    fmt_ns(cell[COL_P99], sizeof(cell[0]), tr[i].p99);
    fmt_ns(cell[COL_CALL], sizeof(cell[0]), tr[i].call);
    (void)tlc_at_text(&tr[i].max_at, cell[COL_AT], sizeof(cell[0]));
    k = snprintf(text, sizeof(text), "%-*.*s", aw, aw, tr[i].name);
    for (c = 0; c < NCOLS; c++)
      if (shown[c] && k >= 0 && (size_t)k < sizeof(text))
        k += c == COL_AT ? snprintf(text + k, sizeof(text) - (size_t)k, " %-*.*s", width[c],
                                    width[c], cell[c])
                         : snprintf(text + k, sizeof(text) - (size_t)k, " %*s", width[c], cell[c]);
    put_line(text, cols, 0);
  }
  tlc_free(tr);
  if (ts->editing) {
    snprintf(text, sizeof(text), "filter: %s", ts->filter);
    printf("\x1b[J\x1b[%d;1H%.*s\x1b[K", rows, cols > 1 ? cols - 1 : 1, text);
  } else {
    snprintf(text, sizeof(text),
             "q quit s sort w window c context x max-at / filter t target j/k PgUp/PgDn - areas "
             "%zu-%zu of %zu",
             n > 0 ? ts->first + 1 : 0, i, n);
    printf("\x1b[J\x1b[%d;1H\x1b[7m%.*s\x1b[0m\x1b[K", rows, cols > 1 ? cols - 1 : 1, text);
  }
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
  case 'c':
    ts->ctx = (ts->ctx + 1) % (ts->nctx + 1);
    ts->first = 0;
    break;
  case 'x':
    ts->at = !ts->at;
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
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_Q + 2);     /* p99 */
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_START); /* MAX AT (key x) */
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_END);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_EPOCH);
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
  uint32_t top_cols[10 + 5 * TLC_MAX_WINDOWS];
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
           "A live view of a target's areas, sorted by net time, redrawn in place, fitted to\n"
           "the terminal (80x24 and up: the columns of least use go first as it narrows).\n"
           "Columns: %% (net time over the time shown: the window, or everything so far; a\n"
           "row of all contexts on several cores may pass 100, as in top(1)), COUNT, T.NET,\n"
           "NET.AVG, NET.MAX, P99 (cumulative only), T.CALL, and with x MAX AT: when\n"
           "NET.MAX's sample was taken (first..closing event, target ns, eN the clock epoch,\n"
           "as `tlcap stats --extremes`; - in a window or when not known). A state row\n"
           "reads VARIABLE = VALUE with the mapping's names.\n"
           "Keys: q quit, s next sort key (net, count, call, max, avg, p99, name), w next\n"
           "window (cumulative, then each rolling window), c next context (all, then each\n"
           "core or task alone), x MAX AT on or off, / filter by name (Enter ends), t next\n"
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
  /* Only what the view shows (docs/protocol.md "Columnar rows"): every row (Neutral and
   * per-context), COUNT, T.NET, T.CALL, NET max, avg and p99, for the cumulative statistics
   * and each rolling window. windows and neutral are set too, for a daemon older than columnar
   * rows (it ignores the columns and sends every field). */
  sub.columns = top_cols;
  sub.n_columns = top_columns(top_cols);
  sub.neutral_only = 0; /* the per-context views (c) need every context's rows */
  sub.quantiles = 1;
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
      else if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT)
        tlc_cli_view_event(&w, m->target_event);
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
