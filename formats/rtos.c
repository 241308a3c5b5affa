/* rtos.c - packed task variables and winIDEA's RTOS description (rtos.h).
 *
 * The XML is read in one pass with expat through tlc_malloc: a stack of element ids (only the
 * elements of rtos.h's outline get one; everything else is skipped with its subtree), the text
 * of the leaf elements collected into one bounded buffer. Every TypeEnum's enums are kept (name,
 * value, which TypeEnum); the first Object with a TaskState gives the thread type, the masks,
 * the state type and the StateInfos. The names are resolved at the end, since the file may
 * list Types after Profiler.
 *
 * Memory: O(input): the enums (at most 65,536, names at most 255 bytes) and 2 * 32 StateInfos.
 */
#include "formats/rtos.h"
#include "formats/xmlrun.h"

#include "base/alloc.h"
#include "base/err.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R_MAX_DEPTH 64
#define R_MAX_TEXT  255
#define R_MAX_ENUMS 65536
#define R_MAX_TYPES 1024

/* ---------------------------------------------------------------- lists and masks */

void tlc_ctxpack_default(tlc_ctxpack_t *p) {
  memset(p, 0, sizeof(*p));
  p->nrun = 1;
  p->run[0] = 1;
  p->stop_all = 1;
}

void tlc_ctxpack_finish(tlc_ctxpack_t *p) {
  uint8_t s = 0;
  if (p->state_mask != 0)
    while (((p->state_mask >> s) & 1u) == 0)
      s++;
  p->shift = s;
}

static int hexdig(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* s[0..n) as hex with an optional 0x; 0 or -1. */
static int hex_n(const char *s, size_t n, uint64_t *out) {
  uint64_t x = 0;
  size_t i = 0;
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    i = 2;
  if (i == n)
    return -1;
  for (; i < n; i++) {
    int d = hexdig(s[i]);
    if (d < 0 || x > (UINT64_MAX >> 4))
      return -1;
    x = (x << 4) | (uint64_t)d;
  }
  *out = x;
  return 0;
}

int tlc_ctxpack_parse_mask(const char *s, uint64_t *out) {
  size_t n = strlen(s);
  while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
    s++;
    n--;
  }
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (hex_n(s, n, out) != 0 || *out == 0)
    return TLC_EINVAL;
  return 0;
}

int tlc_ctxpack_parse_list(const char *s, uint64_t *out, uint8_t *n) {
  unsigned k = 0;
  while (*s != '\0') {
    size_t len;
    while (*s == ' ' || *s == '\t' || *s == ',')
      s++;
    if (*s == '\0')
      break;
    len = strcspn(s, " \t,");
    if (k == TLC_CTXPACK_MAX || hex_n(s, len, &out[k]) != 0)
      return TLC_EINVAL;
    k++;
    s += len;
  }
  if (k == 0)
    return TLC_EINVAL;
  *n = (uint8_t)k;
  return 0;
}

/* ---------------------------------------------------------------- the RTOS description */

enum {
  E_OTHER = 0,
  E_ROOT,
  E_TYPES,
  E_TYPEENUM,
  E_TE_NAME,
  E_ENUM,
  E_EN_NAME,
  E_EN_VALUE,
  E_PROFILER,
  E_OBJECT,
  E_OB_TYPE,
  E_TASKSTATE,
  E_TS_MASKID,
  E_TS_MASKSTATE,
  E_TS_TYPE,
  E_STATEINFO,
  E_SI_NAME,
  E_SI_PROP
};

/* element name under a parent id -> its id */
static const struct {
  uint8_t parent;
  const char *name;
  uint8_t id;
} grammar[] = {
  { E_ROOT, "Types", E_TYPES },           { E_TYPES, "TypeEnum", E_TYPEENUM },
  { E_TYPEENUM, "Name", E_TE_NAME },      { E_TYPEENUM, "Enum", E_ENUM },
  { E_ENUM, "Name", E_EN_NAME },          { E_ENUM, "Value", E_EN_VALUE },
  { E_ROOT, "Profiler", E_PROFILER },     { E_PROFILER, "Object", E_OBJECT },
  { E_OBJECT, "Type", E_OB_TYPE },        { E_OBJECT, "TaskState", E_TASKSTATE },
  { E_TASKSTATE, "MaskID", E_TS_MASKID }, { E_TASKSTATE, "MaskState", E_TS_MASKSTATE },
  { E_TASKSTATE, "Type", E_TS_TYPE },     { E_TASKSTATE, "StateInfo", E_STATEINFO },
  { E_STATEINFO, "Name", E_SI_NAME },     { E_STATEINFO, "Property", E_SI_PROP },
};

typedef struct renum {
  uint32_t type; /* index into types */
  uint64_t value;
  char *name;
} renum_t;

typedef struct rsi {
  char *name;
  int prop; /* TLC_CTXPACK_RUN, _STOP or _NONE */
} rsi_t;

typedef struct rp {
  tlc_xml_base_t b; /* first: the refusals' state (xmlrun.h) */
  unsigned depth;
  uint8_t stack[R_MAX_DEPTH];
  char text[R_MAX_TEXT + 1];
  size_t ntext;
  int text_over;
  /* TypeEnums: names (NULL until its <Name>), and every Enum */
  char **types;
  size_t ntypes;
  renum_t *en;
  size_t nen, capen;
  char *en_name; /* the open Enum's */
  uint64_t en_value;
  int en_has_value;
  /* the chosen Object (the first with a TaskState) */
  int obj_open, obj_done, obj_has_ts;
  char *ob_type, *ts_type;
  uint64_t mask_id, mask_state;
  rsi_t si[2 * TLC_CTXPACK_MAX];
  size_t nsi;
  char *si_name;
  int si_prop;
} rp_t;

/* A handler's refusal (xmlrun.h). */
#define rstop(x, code, ...)                                                                        \
  tlc_xml_stop(((rp_t *)(x))->b.p, &((rp_t *)(x))->b.rc, ((rp_t *)(x))->b.err, (code), __VA_ARGS__)

static char *dup_text(rp_t *x) {
  char *s = tlc_malloc(x->ntext + 1);
  if (s == NULL) {
    rstop(x, TLC_ENOMEM, "out of memory");
    return NULL;
  }
  memcpy(s, x->text, x->ntext);
  s[x->ntext] = '\0';
  return s;
}

/* The collected text without surrounding blanks, NUL-terminated in place. */
static const char *trimmed(rp_t *x) {
  size_t a = 0, b = x->ntext;
  while (a < b && strchr(" \t\r\n", x->text[a]) != NULL)
    a++;
  while (b > a && strchr(" \t\r\n", x->text[b - 1]) != NULL)
    b--;
  memmove(x->text, x->text + a, b - a);
  x->ntext = b - a;
  x->text[x->ntext] = '\0';
  return x->text;
}

/* A number: 0x-hex or decimal. 0 or -1. */
static int number(const char *s, uint64_t *v) {
  char *end;
  if (s[0] == '\0' || s[0] == '-' || s[0] == '+')
    return -1;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    return hex_n(s, strlen(s), v);
  *v = strtoull(s, &end, 10);
  return *end == '\0' && *v != UINT64_MAX ? 0 : -1;
}

static void XMLCALL r_start(void *ud, const XML_Char *name, const XML_Char **atts) {
  rp_t *x = ud;
  uint8_t parent = x->depth ? x->stack[x->depth - 1] : E_OTHER, id = E_OTHER;
  (void)atts;
  if (x->depth == R_MAX_DEPTH) {
    rstop(x, TLC_ELIMIT, "elements nested deeper than %d", R_MAX_DEPTH);
    return;
  }
  if (x->depth == 0) {
    if (strcmp(name, "OperatingSystem") != 0) {
      rstop(x, TLC_ESYNTAX, "root element is <%.60s>, expected <OperatingSystem>", name);
      return;
    }
    id = E_ROOT;
  } else if (parent != E_OTHER) {
    for (size_t i = 0; i < sizeof(grammar) / sizeof(grammar[0]); i++)
      if (grammar[i].parent == parent && strcmp(grammar[i].name, name) == 0)
        id = grammar[i].id;
  }
  /* only the first Object with a TaskState is read: a later Object's parts are skipped */
  if (id == E_OBJECT) {
    if (x->obj_done)
      id = E_OTHER;
    else
      x->obj_open = 1;
  }
  if (id == E_TYPEENUM) {
    char **nt;
    if (x->ntypes == R_MAX_TYPES) {
      rstop(x, TLC_ELIMIT, "more than %d TypeEnums", R_MAX_TYPES);
      return;
    }
    nt = tlc_realloc(x->types, (x->ntypes + 1) * sizeof(*nt));
    if (nt == NULL) {
      rstop(x, TLC_ENOMEM, "out of memory");
      return;
    }
    x->types = nt;
    x->types[x->ntypes++] = NULL;
  }
  if (id == E_ENUM) {
    x->en_name = NULL;
    x->en_has_value = 0;
  }
  if (id == E_STATEINFO) {
    x->si_name = NULL;
    x->si_prop = -1;
  }
  if (id == E_TASKSTATE)
    x->obj_has_ts = 1;
  x->ntext = 0;
  x->text_over = 0;
  x->stack[x->depth++] = id;
}

static void set_str(rp_t *x, char **dst) {
  if (*dst != NULL)
    return; /* the first one counts */
  *dst = dup_text(x);
}

static void XMLCALL r_end(void *ud, const XML_Char *name) {
  rp_t *x = ud;
  uint8_t id;
  const char *s;
  uint64_t v;
  (void)name;
  if (x->depth == 0)
    return;
  id = x->stack[--x->depth];
  if (id == E_OTHER || id == E_ROOT)
    return;
  if (x->text_over && (id == E_TE_NAME || id == E_EN_NAME || id == E_EN_VALUE || id == E_OB_TYPE ||
                       id == E_TS_MASKID || id == E_TS_MASKSTATE || id == E_TS_TYPE ||
                       id == E_SI_NAME || id == E_SI_PROP)) {
    rstop(x, TLC_ELIMIT, "a text longer than %d bytes", R_MAX_TEXT);
    return;
  }
  s = trimmed(x);
  switch (id) {
  case E_TE_NAME:
    set_str(x, &x->types[x->ntypes - 1]);
    break;
  case E_EN_NAME:
    set_str(x, &x->en_name);
    break;
  case E_EN_VALUE:
    if (number(s, &v) != 0) {
      rstop(x, TLC_ESYNTAX, "<Value> is not a number: \"%.40s\"", s);
      return;
    }
    x->en_value = v;
    x->en_has_value = 1;
    break;
  case E_ENUM:
    if (x->en_name == NULL || !x->en_has_value) {
      tlc_free(x->en_name);
      x->en_name = NULL;
      rstop(x, TLC_ESYNTAX, "<Enum> without a <Name> and a <Value>");
      return;
    }
    if (x->nen == R_MAX_ENUMS) {
      rstop(x, TLC_ELIMIT, "more than %d enums", R_MAX_ENUMS);
      return;
    }
    if (x->nen == x->capen) {
      size_t nc = x->capen ? 2 * x->capen : 16;
      renum_t *ne = tlc_realloc(x->en, nc * sizeof(*ne));
      if (ne == NULL) {
        rstop(x, TLC_ENOMEM, "out of memory");
        return;
      }
      x->en = ne;
      x->capen = nc;
    }
    x->en[x->nen].type = (uint32_t)(x->ntypes - 1);
    x->en[x->nen].value = x->en_value;
    x->en[x->nen].name = x->en_name;
    x->en_name = NULL;
    x->nen++;
    break;
  case E_OB_TYPE:
    set_str(x, &x->ob_type);
    break;
  case E_TS_TYPE:
    set_str(x, &x->ts_type);
    break;
  case E_TS_MASKID:
  case E_TS_MASKSTATE:
    if (hex_n(s, strlen(s), &v) != 0) {
      rstop(x, TLC_ESYNTAX, "<%s> is not a hex mask: \"%.40s\"",
            id == E_TS_MASKID ? "MaskID" : "MaskState", s);
      return;
    }
    if (id == E_TS_MASKID)
      x->mask_id = v;
    else
      x->mask_state = v;
    break;
  case E_SI_NAME:
    set_str(x, &x->si_name);
    break;
  case E_SI_PROP:
    x->si_prop = strcmp(s, "Run") == 0         ? TLC_CTXPACK_RUN
                 : strcmp(s, "Terminate") == 0 ? TLC_CTXPACK_STOP
                                               : TLC_CTXPACK_NONE;
    break;
  case E_STATEINFO:
    if (x->si_name == NULL || x->si_prop < 0) {
      tlc_free(x->si_name);
      x->si_name = NULL;
      rstop(x, TLC_ESYNTAX, "<StateInfo> without a <Name> and a <Property>");
      return;
    }
    if (x->nsi == sizeof(x->si) / sizeof(x->si[0])) {
      tlc_free(x->si_name);
      x->si_name = NULL;
      rstop(x, TLC_ELIMIT, "more than %d StateInfos", (int)(sizeof(x->si) / sizeof(x->si[0])));
      return;
    }
    x->si[x->nsi].name = x->si_name;
    x->si[x->nsi].prop = x->si_prop;
    x->si_name = NULL;
    x->nsi++;
    break;
  case E_OBJECT:
    x->obj_open = 0;
    if (x->obj_has_ts) {
      x->obj_done = 1;
    } else { /* an Object without a TaskState: forget what it said */
      tlc_free(x->ob_type);
      x->ob_type = NULL;
    }
    break;
  default:
    break;
  }
}

static void XMLCALL r_text(void *ud, const XML_Char *s, int len) {
  rp_t *x = ud;
  size_t n = (size_t)len;
  if (x->depth == 0 || x->stack[x->depth - 1] == E_OTHER)
    return;
  if (x->ntext + n > R_MAX_TEXT) {
    x->text_over = 1;
    n = R_MAX_TEXT - x->ntext;
  }
  memcpy(x->text + x->ntext, s, n);
  x->ntext += n;
}

/* The TypeEnum named `type` (the last one of that name), or -1. */
static long find_type(const rp_t *x, const char *type) {
  long found = -1;
  if (type == NULL)
    return -1;
  for (size_t i = 0; i < x->ntypes; i++)
    if (x->types[i] != NULL && strcmp(x->types[i], type) == 0)
      found = (long)i;
  return found;
}

/* After the document: the masks, states and names. 0 or an error (err filled). */
static int resolve(rp_t *x, tlc_ctxpack_t *p, tlc_mapping_t *names, uint64_t lines, size_t len) {
  long st = find_type(x, x->ts_type), tt = find_type(x, x->ob_type);
  if (!x->obj_done) {
    tlc_parse_err_set(x->b.err, lines, len, "no <Profiler><Object> with a <TaskState>");
    return TLC_ESYNTAX;
  }
  if (x->mask_id == 0 || x->mask_state == 0) {
    tlc_parse_err_set(x->b.err, lines, len, "<TaskState> needs a nonzero <MaskID> and <MaskState>");
    return TLC_ESYNTAX;
  }
  memset(p, 0, sizeof(*p));
  p->id_mask = x->mask_id;
  p->state_mask = x->mask_state;
  tlc_ctxpack_finish(p);
  for (size_t i = 0; i < x->nsi; i++) {
    uint64_t v = 0;
    int ok = number(x->si[i].name, &v) == 0;
    for (size_t j = 0; !ok && st >= 0 && j < x->nen; j++)
      if (x->en[j].type == (uint32_t)st && strcmp(x->en[j].name, x->si[i].name) == 0) {
        v = x->en[j].value;
        ok = 1;
      }
    if (!ok) {
      tlc_parse_err_set(x->b.err, lines, len,
                        "<StateInfo> %.60s: no such state in the TaskState's type %.40s",
                        x->si[i].name, x->ts_type != NULL ? x->ts_type : "(none)");
      return TLC_ESYNTAX;
    }
    if ((x->si[i].prop == TLC_CTXPACK_RUN && p->nrun == TLC_CTXPACK_MAX) ||
        (x->si[i].prop == TLC_CTXPACK_STOP && p->nstop == TLC_CTXPACK_MAX)) {
      tlc_parse_err_set(x->b.err, lines, len, "more than %d %s states", TLC_CTXPACK_MAX,
                        x->si[i].prop == TLC_CTXPACK_RUN ? "Run" : "Terminate");
      return TLC_ELIMIT;
    }
    if (x->si[i].prop == TLC_CTXPACK_RUN)
      p->run[p->nrun++] = v;
    else if (x->si[i].prop == TLC_CTXPACK_STOP)
      p->stop[p->nstop++] = v;
  }
  if (p->nrun == 0) {
    tlc_parse_err_set(x->b.err, lines, len, "no <StateInfo> with <Property>Run</Property>");
    return TLC_ESYNTAX;
  }
  for (size_t j = 0; names != NULL && tt >= 0 && j < x->nen; j++)
    if (x->en[j].type == (uint32_t)tt) {
      int r = tlc_mapping_add_ctx(names, x->en[j].value, x->en[j].name);
      if (r != 0) {
        tlc_parse_err_set(x->b.err, lines, len, "%s",
                          r == TLC_ELIMIT ? "too many task names" : "out of memory");
        return r;
      }
    }
  return 0;
}

int tlc_rtos_parse(const char *buf, size_t len, tlc_ctxpack_t *p, tlc_mapping_t *names,
                   tlc_parse_err_t *err) {
  rp_t *x = tlc_calloc(1, sizeof(*x));
  int r = 0;
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  if (x == NULL) {
    tlc_parse_err_set(err, 0, 0, "out of memory");
    return TLC_ENOMEM;
  }
  if (tlc_xml_open(&x->b, x, err) != 0) {
    tlc_free(x);
    return TLC_ENOMEM;
  }
  XML_SetElementHandler(x->b.p, r_start, r_end);
  XML_SetCharacterDataHandler(x->b.p, r_text);
  r = tlc_xml_run(x->b.p, buf, len, &x->b.rc, err);
  if (r == 0 && x->b.rc != 0)
    r = x->b.rc;
  if (r == 0) {
    uint64_t lines = 1;
    for (size_t i = 0; i + 1 < len; i++)
      lines += buf[i] == '\n';
    r = resolve(x, p, names, lines, len);
  }
  XML_ParserFree(x->b.p);
  for (size_t i = 0; i < x->ntypes; i++)
    tlc_free(x->types[i]);
  tlc_free(x->types);
  for (size_t i = 0; i < x->nen; i++)
    tlc_free(x->en[i].name);
  tlc_free(x->en);
  for (size_t i = 0; i < x->nsi; i++)
    tlc_free(x->si[i].name);
  tlc_free(x->en_name);
  tlc_free(x->si_name);
  tlc_free(x->ob_type);
  tlc_free(x->ts_type);
  tlc_free(x);
  return r;
}
