/* json.c - the JSON writer (see json.h): members, elements, commas and indentation, string
 * literals and 128-bit decimals. */
#include "base/json.h"

#include <string.h>

void tlc_out_u128(tlc_out_t *o, uint64_t hi, uint64_t lo) {
  char b[40];
  size_t i = sizeof(b);
  if (hi == 0) {
    tlc_out_u64(o, lo);
    return;
  }
  /* long division of (hi, lo) by 10, 32 bits at a time */
  while (hi != 0 || lo != 0) {
    uint64_t parts[4] = { hi >> 32, hi & 0xFFFFFFFFu, lo >> 32, lo & 0xFFFFFFFFu };
    uint64_t rem = 0;
    int k;
    for (k = 0; k < 4; k++) {
      uint64_t cur = (rem << 32) | parts[k];
      parts[k] = cur / 10;
      rem = cur % 10;
    }
    hi = (parts[0] << 32) | parts[1];
    lo = (parts[2] << 32) | parts[3];
    b[--i] = (char)('0' + rem);
  }
  tlc_out_write(o, b + i, sizeof(b) - i);
}

void tlc_json_string(tlc_out_t *o, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  static const char hex[] = "0123456789abcdef";
  tlc_out_putc(o, '"');
  while (*s) {
    size_t n;
    if (*s == '"' || *s == '\\') {
      tlc_out_putc(o, '\\');
      tlc_out_putc(o, (char)*s++);
    } else if (*s < 0x20) {
      char e[7] = { '\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 15], 0 };
      if (*s == '\n')
        tlc_out_puts(o, "\\n");
      else if (*s == '\t')
        tlc_out_puts(o, "\\t");
      else if (*s == '\r')
        tlc_out_puts(o, "\\r");
      else
        tlc_out_write(o, e, 6);
      s++;
    } else if ((n = tlc_utf8_len(s)) == 0) {
      tlc_out_puts(o, "\\ufffd");
      s++;
    } else {
      tlc_out_write(o, s, n);
      s += n;
    }
  }
  tlc_out_putc(o, '"');
}

typedef tlc_json_w_t jw_t;

void tlc_json_w_init(tlc_json_w_t *w, tlc_out_t *o, int compact) {
  w->o = o;
  w->compact = compact;
  w->depth = 0;
  w->first = 1;
}

static void nl(jw_t *w) {
  int i;
  if (w->compact)
    return;
  tlc_out_putc(w->o, '\n');
  for (i = 0; i < w->depth; i++)
    tlc_out_puts(w->o, "  ");
}

void tlc_json_w_key(jw_t *w, const char *k) {
  if (!w->first)
    tlc_out_putc(w->o, ',');
  w->first = 0;
  nl(w);
  if (k != NULL) {
    tlc_out_putc(w->o, '"');
    tlc_out_puts(w->o, k);
    tlc_out_puts(w->o, w->compact ? "\":" : "\": ");
  }
}

void tlc_json_w_open(jw_t *w, const char *k, char c) {
  tlc_json_w_key(w, k);
  tlc_out_putc(w->o, c);
  w->depth++;
  w->first = 1;
}

void tlc_json_w_close(jw_t *w, char c) {
  int empty = w->first;
  w->depth--;
  if (!empty)
    nl(w);
  tlc_out_putc(w->o, c);
  w->first = 0;
}

void tlc_json_w_i64(jw_t *w, const char *k, int64_t v) {
  tlc_json_w_key(w, k);
  tlc_out_i64(w->o, v);
}

void tlc_json_w_u64(jw_t *w, const char *k, uint64_t v) {
  tlc_json_w_key(w, k);
  tlc_out_u64(w->o, v);
}

void tlc_json_w_str(jw_t *w, const char *k, const char *v) {
  tlc_json_w_key(w, k);
  if (v == NULL)
    tlc_out_puts(w->o, "null");
  else
    tlc_json_string(w->o, v);
}

void tlc_json_w_bool(jw_t *w, const char *k, int v) {
  tlc_json_w_key(w, k);
  tlc_out_puts(w->o, v ? "true" : "false");
}

void tlc_json_w_raw(jw_t *w, const char *k, const char *json) {
  tlc_json_w_key(w, k);
  tlc_out_puts(w->o, json);
}

void tlc_json_w_hex8(jw_t *w, const char *k, uint32_t v) {
  tlc_json_w_key(w, k);
  tlc_out_putc(w->o, '"');
  tlc_out_hex(w->o, v, 8);
  tlc_out_putc(w->o, '"');
}
