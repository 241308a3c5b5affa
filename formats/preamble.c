/* preamble.c - the "TLCAP/1 target=<name> format=<fmt>\n" stream preamble (see preamble.h).
 *
 *   T L C A P / 1 ' ' key=value ( ' ' key=value )* [\r] \n
 *
 * Names: the characters of tlc_target_name_valid, and neither '@' (automatic names are
 * "<listener>@<peer IP>": a preamble cannot take another address's name) nor a NUL byte.
 *
 * Invariants: never reads past len or past TLC_PREAMBLE_MAX bytes; copies the name only after
 * checking its length; a line that is not finished within TLC_PREAMBLE_MAX bytes (or by the end
 * of the stream) is bad, so a peer cannot make the daemon buffer more than that.
 */
#include "formats/preamble.h"

#include "base/err.h"
#include "formats/dec.h"

#include <stdio.h>
#include <string.h>

static const char magic[] = "TLCAP/1 ";
#define MAGIC_LEN 8

int tlc_target_name_valid(const char *name, size_t max) {
  size_t n = strlen(name), i;
  if (n == 0 || n > max || name[0] == '.')
    return TLC_EINVAL;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          (c != '\0' && strchr("._@:#+=[]-", c) != NULL)))
      return TLC_EINVAL;
  }
  return 0;
}

int tlc_preamble_parse(const char *buf, size_t len, int at_eof, size_t max_name,
                       tlc_preamble_t *out, char *why, size_t whylen) {
  size_t m = len < MAGIC_LEN ? len : MAGIC_LEN, end, i;
  const char *nl;
  memset(out, 0, sizeof(*out));
  if (why != NULL && whylen > 0)
    why[0] = '\0';
  if (max_name == 0 || max_name > TLC_NAME_MAX)
    max_name = TLC_NAME_MAX;
  if (memcmp(buf, magic, m) != 0)
    return TLC_PRE_NONE;
  if (len < MAGIC_LEN)
    return at_eof ? TLC_PRE_NONE : TLC_PRE_MORE;
  nl = memchr(buf, '\n', len < TLC_PREAMBLE_MAX ? len : TLC_PREAMBLE_MAX);
  if (nl == NULL) {
    if (len < TLC_PREAMBLE_MAX && !at_eof)
      return TLC_PRE_MORE;
    snprintf(why, whylen, "%s",
             at_eof ? "line cut short by the end of the stream" : "line longer than 256 bytes");
    return TLC_PRE_BAD;
  }
  out->length = (size_t)(nl - buf) + 1;
  end = (size_t)(nl - buf);
  if (end > MAGIC_LEN && buf[end - 1] == '\r')
    end--;
  /* key=value words separated by single or repeated spaces */
  for (i = MAGIC_LEN; i < end;) {
    size_t w = i, eq, vlen;
    while (w < end && buf[w] != ' ')
      w++;
    if (w == i) {
      i++;
      continue;
    }
    for (eq = i; eq < w && buf[eq] != '='; eq++)
      ;
    vlen = eq < w ? w - eq - 1 : 0;
    if (eq - i == 6 && memcmp(buf + i, "target", 6) == 0 && eq < w) {
      if (vlen == 0 || vlen > max_name) {
        snprintf(why, whylen, "target name of %zu bytes (1..%zu)", vlen, max_name);
        return TLC_PRE_BAD;
      }
      /* A NUL would cut the name ("abc\0../../x" read as "abc"); '@' belongs to the automatic
       * names "<listener>@<peer IP>", which a preamble must not take. Control
       * characters fail tlc_target_name_valid. */
      if (memchr(buf + eq + 1, '\0', vlen) != NULL || memchr(buf + eq + 1, '@', vlen) != NULL) {
        snprintf(why, whylen,
                 "target name with %s (a preamble name has no '@', NUL or control "
                 "character)",
                 memchr(buf + eq + 1, '@', vlen) != NULL ? "'@'" : "a NUL byte");
        return TLC_PRE_BAD;
      }
      memcpy(out->name, buf + eq + 1, vlen);
      out->name[vlen] = '\0';
      if (tlc_target_name_valid(out->name, max_name) != 0) {
        snprintf(why, whylen,
                 "invalid target name (1..%zu of A-Z a-z 0-9 . _ - @ : # + = [ ], not starting "
                 "with '.')",
                 max_name);
        return TLC_PRE_BAD;
      }
      out->has_name = 1;
    } else if (eq - i == 6 && memcmp(buf + i, "format", 6) == 0 && eq < w) {
      char f[8];
      if (vlen == 0 || vlen >= sizeof(f)) {
        snprintf(why, whylen, "unknown format \"%.*s\"", (int)(vlen < 16 ? vlen : 16),
                 buf + eq + 1);
        return TLC_PRE_BAD;
      }
      memcpy(f, buf + eq + 1, vlen);
      f[vlen] = '\0';
      out->format = tlc_format_parse(f);
      if (out->format == TLC_FMT_NONE) {
        snprintf(why, whylen, "unknown format \"%s\" (bin10, bin11, evlog)", f);
        return TLC_PRE_BAD;
      }
    }
    i = w;
  }
  return TLC_PRE_OK;
}
