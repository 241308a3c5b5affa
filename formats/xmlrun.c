/* xmlrun.c - a whole buffer through an expat parser (see xmlrun.h). */
#include "formats/xmlrun.h"

#include "base/err.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define XML_SLICE (1u << 20)

static void seterr(tlc_parse_err_t *e, XML_Parser p, const char *reason) {
  if (e == NULL)
    return;
  e->line = (uint64_t)XML_GetCurrentLineNumber(p);
  e->offset = (uint64_t)XML_GetCurrentByteIndex(p);
  snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

int tlc_xml_run(XML_Parser p, const char *buf, size_t len, const int *handler_rc,
                tlc_parse_err_t *err) {
  size_t off = 0;
  do {
    size_t chunk = len - off > XML_SLICE ? XML_SLICE : len - off;
    int final = off + chunk == len;
    if (XML_Parse(p, buf + off, (int)chunk, final) != XML_STATUS_OK) {
      enum XML_Error e = XML_GetErrorCode(p);
      char why[sizeof(((tlc_parse_err_t *)0)->reason)];
      if (*handler_rc != 0)
        return *handler_rc;
      if (e == XML_ERROR_NO_MEMORY) {
        seterr(err, p, "out of memory");
        return TLC_ENOMEM;
      }
      snprintf(why, sizeof(why), "XML: %s (column %lu)", XML_ErrorString(e),
               (unsigned long)XML_GetCurrentColumnNumber(p));
      seterr(err, p, why);
      return TLC_ESYNTAX;
    }
    off += chunk;
  } while (off < len);
  return 0;
}

void tlc_xml_stop(XML_Parser p, int *rc, tlc_parse_err_t *err, int code, const char *fmt, ...) {
  va_list ap;
  if (*rc != 0)
    return;
  *rc = code;
  if (err != NULL) {
    err->line = (uint64_t)XML_GetCurrentLineNumber(p);
    err->offset = (uint64_t)XML_GetCurrentByteIndex(p);
    va_start(ap, fmt);
    vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
    va_end(ap);
  }
  XML_StopParser(p, XML_FALSE);
}
