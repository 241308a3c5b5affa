/* evmap.c - the evlog mapping: decoded evlog items to engine events (see evmap.h).
 *
 * State, all capped at creation:
 *
 *   areas[]   in order of first appearance: { handle, name offset, name length }
 *   names_ht  hash table (base/htab.h): hash of (type nibble, name) -> areas index
 *   names     one arena of NUL-terminated names (grows by doubling, <= max_name_bytes)
 *   bytype[t] per area type: areas index of handle t<<28 | i (handle -> name)
 *   threads[] { id, stack of open code-area handles (bottom first), depth, cap }, found
 *             through threads_ht: thread id -> threads index
 *
 * Invariants: a thread's stack holds the open activations the engine has for it, innermost
 * last; every entry below the top is suspended (it got an S when the next one was pushed), the
 * top one is running. A handle is never reused; a name keeps its handle for the life of m.
 *
 * Cost: one hash of the name and one probe sequence per item, a scan of the thread's stack for
 * `-` (short in practice); no allocation unless a name, a thread or a depth is new.
 *
 * What it does not do: statistics (the engine), nor any check of time order (items of
 * different threads are not in time order in real files; the engine handles it). Items whose
 * name would pass a cap map to nothing and are counted; a thread beyond max_threads still gets
 * its E/X, but no S/R; an E beyond max_depth is emitted but not pushed, so its X later closes
 * the next open activation of that area, if any.
 */
#include "formats/evmap.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/htab.h"

#include <string.h>

#define NTYPES 6

#if defined(__GNUC__)
#define TLC_EVMAP_NOINLINE __attribute__((noinline))
#else
#define TLC_EVMAP_NOINLINE
#endif

typedef struct area {
  uint32_t handle;
  uint32_t len; /* name length, NUL excluded */
  size_t off;   /* name offset in the arena */
} area_t;

typedef struct thr {
  uint64_t id;
  uint32_t *stack;
  uint32_t depth, cap;
} thr_t;

typedef struct vec32 {
  uint32_t *v;
  size_t n, cap;
} vec32_t;

struct tlc_evmap {
  tlc_evmap_opts_t opts;
  tlc_evmap_counters_t c;
  area_t *areas;
  size_t nareas, capareas;
  tlc_htab_t names_ht; /* name_hash -> areas index */
  char *names;
  size_t names_len, names_cap;
  vec32_t bytype[NTYPES];
  thr_t *threads;
  size_t nthreads, capthreads;
  tlc_htab_t threads_ht; /* thread id -> threads index */
  size_t charged;        /* granted by opts.charge_cb, given back at free */
  int loading;           /* tlc_evmap_load: names granted before, charged with force */
};

int tlc_evmap_new(tlc_evmap_t **mp, const tlc_evmap_opts_t *opts) {
  tlc_evmap_t *m;
  *mp = NULL;
  m = tlc_calloc(1, sizeof(*m));
  if (m == NULL)
    return TLC_ENOMEM;
  if (opts != NULL)
    m->opts = *opts;
  if (m->opts.max_names == 0)
    m->opts.max_names = 1000000;
  if (m->opts.max_name_bytes == 0)
    m->opts.max_name_bytes = 64u << 20;
  if (m->opts.max_depth == 0)
    m->opts.max_depth = 1024;
  if (m->opts.max_threads == 0)
    m->opts.max_threads = 65536;
  if (m->opts.max_names > (1u << 28) || m->opts.max_depth > UINT32_MAX ||
      m->opts.max_threads > UINT32_MAX / 4) {
    tlc_free(m);
    return TLC_EINVAL;
  }
  *mp = m;
  return 0;
}

void tlc_evmap_free(tlc_evmap_t *m) {
  size_t i;
  if (m == NULL)
    return;
  if (m->charged > 0 && m->opts.release_cb != NULL)
    m->opts.release_cb(m->opts.acct_ud, m->charged);
  for (i = 0; i < m->nthreads; i++)
    tlc_free(m->threads[i].stack);
  for (i = 0; i < NTYPES; i++)
    tlc_free(m->bytype[i].v);
  tlc_free(m->threads);
  tlc_htab_fini(&m->threads_ht);
  tlc_free(m->areas);
  tlc_htab_fini(&m->names_ht);
  tlc_free(m->names);
  tlc_free(m);
}

const tlc_evmap_counters_t *tlc_evmap_counters(const tlc_evmap_t *m) {
  return &m->c;
}

/* FNV-1a of (type, name); the table mixes it (tlc_mix64) before placing it. */
static uint64_t name_hash(unsigned type, const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull ^ type;
  size_t i;
  for (i = 0; i < len; i++) {
    h ^= (uint8_t)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* Adds the area (type, name) of hash `hash` (not there yet): area_handle's returns. Kept out of
 * line: the lookup before it is the path every item takes. */
static TLC_EVMAP_NOINLINE int area_add(tlc_evmap_t *m, unsigned type, const char *name, size_t len,
                                       uint64_t hash, uint32_t *h) {
  vec32_t *bt = &m->bytype[type];
  area_t *a;
  void *p;
  if (m->nareas >= m->opts.max_names || len + 1 > m->opts.max_name_bytes - m->names_len)
    return TLC_ELIMIT;
  if (m->opts.charge_cb != NULL) {
    /* the most a new area holds once the doubling arrays have grown for it: its name, its
     * area_t, its bytype entry and its two hash slots (load <= 1/2), each twice */
    size_t cost = 2 * (len + 1 + sizeof(area_t) + sizeof(uint32_t) + 2 * sizeof(tlc_htab_slot_t));
    if (m->opts.charge_cb(m->opts.acct_ud, cost, m->loading) != 0)
      return TLC_ELIMIT;
    m->charged += cost;
  }
  /* Make every room first, so that a failure leaves m unchanged. */
  if ((p = tlc_grow(m->areas, &m->capareas, m->nareas + 1, sizeof(*m->areas), 8)) == NULL)
    return TLC_ENOMEM;
  m->areas = p;
  if ((p = tlc_grow(bt->v, &bt->cap, bt->n + 1, sizeof(*bt->v), 8)) == NULL)
    return TLC_ENOMEM;
  bt->v = p;
  if (m->names_len + len + 1 > m->names_cap) {
    size_t nc = m->names_cap != 0 ? m->names_cap : 4096;
    char *nn;
    while (nc < m->names_len + len + 1)
      nc *= 2;
    if (nc > m->opts.max_name_bytes)
      nc = m->opts.max_name_bytes;
    nn = tlc_realloc(m->names, nc);
    if (nn == NULL)
      return TLC_ENOMEM;
    m->names = nn;
    m->names_cap = nc;
  }
  if (tlc_htab_reserve(&m->names_ht, m->nareas + 1) < 0)
    return TLC_ENOMEM;
  a = &m->areas[m->nareas];
  a->handle = (uint32_t)type << 28 | (uint32_t)bt->n;
  a->len = (uint32_t)len;
  a->off = m->names_len;
  memcpy(m->names + m->names_len, name, len);
  m->names[m->names_len + len] = '\0';
  m->names_len += len + 1;
  bt->v[bt->n++] = (uint32_t)m->nareas;
  (void)tlc_htab_add(&m->names_ht, hash, m->nareas); /* reserved: cannot fail */
  m->nareas++;
  *h = a->handle;
  return 0;
}

/* The handle of (type, name), adding the area if new. Returns 0 with *h, TLC_ELIMIT past a cap,
 * or TLC_ENOMEM (nothing added). */
static int area_handle(tlc_evmap_t *m, unsigned type, const char *name, size_t len, uint32_t *h) {
  uint64_t hash = name_hash(type, name, len);
  const uint64_t *v;
  for (v = tlc_htab_get(&m->names_ht, hash); v != NULL;
       v = tlc_htab_get_next(&m->names_ht, hash, v)) {
    const area_t *a = &m->areas[*v];
    if (a->len == len && (a->handle >> 28) == type && memcmp(m->names + a->off, name, len) == 0) {
      *h = a->handle;
      return 0;
    }
  }
  return area_add(m, type, name, len, hash, h);
}

/* The thread's entry, added if new; *t = NULL past max_threads. 0 or TLC_ENOMEM. */
static int thread_get(tlc_evmap_t *m, uint64_t id, thr_t **t) {
  const uint64_t *v = tlc_htab_get(&m->threads_ht, id);
  void *p;
  *t = NULL;
  if (v != NULL) {
    *t = &m->threads[*v];
    return 0;
  }
  if (m->nthreads >= m->opts.max_threads)
    return 0;
  if ((p = tlc_grow(m->threads, &m->capthreads, m->nthreads + 1, sizeof(*m->threads), 8)) == NULL)
    return TLC_ENOMEM;
  m->threads = p;
  if (tlc_htab_put(&m->threads_ht, id, m->nthreads) < 0)
    return TLC_ENOMEM;
  *t = &m->threads[m->nthreads++];
  memset(*t, 0, sizeof(**t));
  (*t)->id = id;
  return 0;
}

void tlc_evmap_gap(tlc_evmap_t *m) {
  size_t i;
  for (i = 0; i < m->nthreads; i++)
    m->threads[i].depth = 0;
  m->c.gaps++;
}

/* Parses an unsigned decimal integer with optional surrounding blanks; 0 or -1. */
static int parse_u64(const char *s, uint64_t *v) {
  uint64_t x = 0;
  int digits = 0;
  while (*s == ' ' || *s == '\t')
    s++;
  for (; *s >= '0' && *s <= '9'; s++, digits++) {
    unsigned dg = (unsigned)(*s - '0');
    if (x > (UINT64_MAX - dg) / 10)
      return -1;
    x = x * 10 + dg;
  }
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
    s++;
  if (digits == 0 || *s != '\0')
    return -1;
  *v = x;
  return 0;
}

static int is_cpu_event(const char *s, size_t len) {
  return len >= 8 && (memcmp(s, "*CPUFREQ", 8) == 0 || memcmp(s, "*CPUUSED", 8) == 0) &&
         (len == 8 || s[8] == ' ');
}

static void make(tlc_event_t *o, const tlc_event_t *in, uint32_t handle, uint8_t type,
                 uint64_t data, uint16_t flags) {
  *o = *in;
  o->handle = handle;
  o->type = type;
  o->data = data;
  o->core = TLC_CORE_UNKNOWN;
  o->flags = flags;
}

static int map1(tlc_evmap_t *m, const tlc_event_t *in, tlc_event_t out[2]) {
  const tlc_evlog_ext_t *x = in->evlog;
  const char *s;
  size_t len;
  unsigned area;
  uint8_t type;
  uint64_t value = 0;
  uint32_t h;
  uint16_t f = in->flags & (uint16_t)~TLC_EVF_SYNTH;
  thr_t *t = NULL;
  int rc, n;
  if (x == NULL || x->event == NULL)
    return TLC_EINVAL;
  s = x->event;
  len = x->event_len;
  if (in->flags & TLC_EVF_GAP)
    tlc_evmap_gap(m);
  switch (len > 0 ? s[0] : '\0') {
  case '+':
    area = TLC_AREA_FUNCTION;
    type = TLC_EV_ENTRY;
    break;
  case '-':
    area = TLC_AREA_FUNCTION;
    type = TLC_EV_EXIT;
    break;
  case '>':
    area = TLC_AREA_VARSTATE;
    type = TLC_EV_WRITE;
    value = 1;
    break;
  case '<':
    area = TLC_AREA_VARSTATE;
    type = TLC_EV_EXIT;
    break;
  case '!':
    area = TLC_AREA_VARIABLE;
    type = TLC_EV_WRITE;
    break;
  case '*':
    if (!is_cpu_event(s, len)) {
      m->c.metadata++;
      return 0;
    }
    if (x->detail == NULL || parse_u64(x->detail, &value) < 0) {
      m->c.parse_errors++;
      return 0;
    }
    area = TLC_AREA_AUX;
    type = TLC_EV_WRITE;
    break;
  default:
    m->c.parse_errors++;
    return 0;
  }
  if (len < 2) {
    m->c.parse_errors++;
    return 0;
  }
  rc = area_handle(m, area, s + 1, len - 1, &h);
  if (rc == TLC_ELIMIT) {
    m->c.dropped_area_limit++;
    return 0;
  }
  if (rc < 0)
    return rc;
  if (area == TLC_AREA_FUNCTION && (rc = thread_get(m, in->thread, &t)) < 0)
    return rc;
  if (area == TLC_AREA_FUNCTION && t == NULL)
    m->c.untracked_thread++;

  n = 0;
  if (t != NULL && type == TLC_EV_ENTRY) {
    if (t->depth > 0) {
      make(&out[n++], in, t->stack[t->depth - 1], TLC_EV_SUSPEND, 0,
           (uint16_t)((f & ~TLC_EVF_BLOCK_END) | TLC_EVF_SYNTH));
      f &= (uint16_t)~TLC_EVF_GAP;
    }
    if (t->depth >= m->opts.max_depth) {
      m->c.depth_limit++;
    } else {
      size_t cap = t->cap;
      uint32_t *st = tlc_grow(t->stack, &cap, (size_t)t->depth + 1, sizeof(*t->stack), 8);
      if (st == NULL)
        return TLC_ENOMEM;
      t->stack = st;
      t->cap = (uint32_t)cap;
      t->stack[t->depth++] = h;
    }
    make(&out[n++], in, h, type, 0, f);
  } else if (t != NULL && type == TLC_EV_EXIT) {
    uint32_t i = t->depth;
    while (i > 0 && t->stack[i - 1] != h)
      i--;
    if (i > 0) {
      t->depth = i - 1;
      if (t->depth > 0) {
        make(&out[n++], in, h, type, 0, (uint16_t)(f & ~TLC_EVF_BLOCK_END));
        make(&out[n++], in, t->stack[t->depth - 1], TLC_EV_RESUME, 0,
             (uint16_t)((f & ~TLC_EVF_GAP) | TLC_EVF_SYNTH));
      }
    }
    if (n == 0)
      make(&out[n++], in, h, type, 0, f);
  } else {
    make(&out[n++], in, h, type, value, f);
  }
  m->c.synthesized += (uint64_t)n - 1;
  m->c.events += (uint64_t)n;
  return n;
}

int tlc_evmap_map(tlc_evmap_t *m, const tlc_event_t *in, tlc_event_t out[2]) {
  int n = map1(m, in, out);
  if (n >= 0)
    m->c.items++;
  return n;
}

const char *tlc_evmap_name(const tlc_evmap_t *m, uint32_t handle) {
  unsigned type = handle >> 28;
  uint32_t i = handle & 0x0FFFFFFFu;
  if (type >= NTYPES || i >= m->bytype[type].n)
    return NULL;
  return m->names + m->areas[m->bytype[type].v[i]].off;
}

size_t tlc_evmap_area_count(const tlc_evmap_t *m) {
  return m->nareas;
}

uint32_t tlc_evmap_area_handle(const tlc_evmap_t *m, size_t i) {
  return i < m->nareas ? m->areas[i].handle : TLC_NO_HANDLE;
}

int tlc_evmap_export(const tlc_evmap_t *m, tlc_mapping_t *out) {
  size_t i;
  for (i = 0; i < m->nareas; i++) {
    tlc_map_area_t a;
    int rc;
    memset(&a, 0, sizeof(a));
    a.handle = m->areas[i].handle;
    a.parent = TLC_NO_HANDLE;
    a.state_handle = TLC_NO_HANDLE;
    a.name = m->names + m->areas[i].off;
    if (tlc_handle_area(a.handle) == TLC_AREA_VARSTATE) {
      a.has_value = 1;
      a.value = 1;
    }
    if ((rc = tlc_mapping_add(out, &a)) < 0)
      return rc;
  }
  return 0;
}

/* ---- checkpoints ---- */

#define EVM_MAGIC 0x314D5645u /* "EVM1" */

int tlc_evmap_save(const tlc_evmap_t *m, tlc_ckw_t *w) {
  size_t i;
  tlc_ckw_u32(w, EVM_MAGIC);
  tlc_ckw_bytes(w, &m->c, sizeof(m->c));
  tlc_ckw_u64(w, m->nareas);
  for (i = 0; i < m->nareas; i++) {
    const area_t *a = &m->areas[i];
    tlc_ckw_u32(w, a->handle);
    tlc_ckw_u32(w, a->len);
    tlc_ckw_bytes(w, m->names + a->off, a->len);
  }
  tlc_ckw_u64(w, m->nthreads);
  for (i = 0; i < m->nthreads; i++) {
    const thr_t *t = &m->threads[i];
    tlc_ckw_u64(w, t->id);
    tlc_ckw_u32(w, t->depth);
    tlc_ckw_bytes(w, t->stack, (size_t)t->depth * sizeof(uint32_t));
  }
  tlc_ckw_u32(w, EVM_MAGIC);
  return w->err;
}

int tlc_evmap_load(tlc_evmap_t *m, tlc_ckr_t *r) {
  tlc_evmap_counters_t c;
  uint64_t n, i;
  if (m->nareas != 0 || m->nthreads != 0)
    return TLC_EINVAL;
  if (tlc_ckr_u32(r) != EVM_MAGIC)
    return TLC_EFRAME;
  tlc_ckr_bytes(r, &c, sizeof(c));
  n = tlc_ckr_u64(r);
  if (!tlc_ckr_room(r, n, 8))
    return TLC_EFRAME;
  for (i = 0; i < n; i++) {
    uint32_t handle = tlc_ckr_u32(r), len = tlc_ckr_u32(r), h;
    const uint8_t *name;
    int rc;
    if (r->err != 0 || (handle >> 28) >= NTYPES || len == 0)
      return TLC_EFRAME;
    name = tlc_ckr_take(r, len);
    if (name == NULL || memchr(name, 0, len) != NULL)
      return TLC_EFRAME;
    /* areas come back in their order of appearance, so each gets its handle again */
    m->loading = 1;
    rc = area_handle(m, handle >> 28, (const char *)name, len, &h);
    m->loading = 0;
    if (rc == TLC_ENOMEM)
      return rc;
    if (rc != 0 || h != handle)
      return TLC_EFRAME;
  }
  n = tlc_ckr_u64(r);
  if (!tlc_ckr_room(r, n, 12))
    return TLC_EFRAME;
  for (i = 0; i < n; i++) {
    uint64_t id = tlc_ckr_u64(r);
    uint32_t depth = tlc_ckr_u32(r), j;
    thr_t *t;
    int rc;
    if (r->err != 0 || depth > m->opts.max_depth || !tlc_ckr_room(r, depth, 4))
      return TLC_EFRAME;
    if ((rc = thread_get(m, id, &t)) != 0)
      return rc;
    if (t == NULL || t->depth != 0 || t->cap != 0)
      return TLC_EFRAME; /* past max_threads, or a thread twice */
    if (depth > 0) {
      t->stack = tlc_malloc((size_t)depth * sizeof(uint32_t));
      if (t->stack == NULL)
        return TLC_ENOMEM;
      t->cap = depth;
      tlc_ckr_bytes(r, t->stack, (size_t)depth * sizeof(uint32_t));
      for (j = 0; j < depth; j++)
        if ((t->stack[j] >> 28) != TLC_AREA_FUNCTION ||
            (t->stack[j] & 0x0FFFFFFFu) >= m->bytype[TLC_AREA_FUNCTION].n)
          return TLC_EFRAME;
      t->depth = depth;
    }
  }
  if (tlc_ckr_u32(r) != EVM_MAGIC || r->err != 0)
    return TLC_EFRAME;
  m->c = c;
  return 0;
}
