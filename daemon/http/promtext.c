/* promtext.c - the Prometheus text format's pieces that every family writes: its HELP and
 * TYPE lines, a label, seconds (http-int.h). Below metrics.c and families.c.
 */
#include "http/http-int.h"
#include "http/promtext.h"

#include "formats/json.h"

#include <string.h>

void tlc__http_out_seconds(tlc_out_t *o, int64_t ns) {
  char b[32];
  tlc_out_write(o, b, (size_t)(tlc__http_p_seconds(b, ns) - b));
}

/* A label value: backslash, double quote and line feed escaped (both formats). */
void tlc__http_label(tlc_out_t *o, const char *name, const char *v, int first) {
  if (!first)
    tlc_out_putc(o, ',');
  tlc_out_puts(o, name);
  tlc_out_puts(o, "=\"");
  for (; *v; v++) {
    if (*v == '\\')
      tlc_out_puts(o, "\\\\");
    else if (*v == '"')
      tlc_out_puts(o, "\\\"");
    else if (*v == '\n')
      tlc_out_puts(o, "\\n");
    else if ((unsigned char)*v < 0x80)
      tlc_out_putc(o, *v);
    else {
      /* Prometheus refuses invalid UTF-8: such bytes (a mapping's name) become U+FFFD */
      size_t l = tlc_utf8_len((const unsigned char *)v);
      if (l == 0) {
        tlc_out_puts(o, "\xEF\xBF\xBD");
      } else {
        tlc_out_write(o, v, l);
        v += l - 1;
      }
    }
  }
  tlc_out_putc(o, '"');
}

/* Family header. OpenMetrics: a counter's family name has no _total. */
void tlc__http_family(tlc_out_t *o, int om, const char *name, const char *type, const char *help) {
  size_t n = strlen(name);
  int strip = om && strcmp(type, "counter") == 0 && n > 6 && strcmp(name + n - 6, "_total") == 0;
  tlc_out_puts(o, "# HELP ");
  tlc_out_write(o, name, strip ? n - 6 : n);
  tlc_out_putc(o, ' ');
  tlc_out_puts(o, help);
  tlc_out_puts(o, "\n# TYPE ");
  tlc_out_write(o, name, strip ? n - 6 : n);
  tlc_out_putc(o, ' ');
  tlc_out_puts(o, type);
  tlc_out_putc(o, '\n');
}
