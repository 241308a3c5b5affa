/* xmlrun.c - a whole buffer through an expat parser (see xmlrun.h). */
#include "formats/xmlrun.h"

#include "base/err.h"
#include "base/alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

static void XMLCALL refuse_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                                   const XML_Char *pubid, int has_internal_subset) {
  tlc_xml_base_t *b = ud;
  (void)name;
  (void)sysid;
  (void)pubid;
  (void)has_internal_subset;
  tlc_xml_stop(b->p, &b->rc, b->err, TLC_ESYNTAX,
               "document type declarations (DOCTYPE) are not accepted");
}

static void XMLCALL refuse_entity(void *ud, const XML_Char *name, int is_param,
                                  const XML_Char *value, int value_length, const XML_Char *base,
                                  const XML_Char *sysid, const XML_Char *pubid,
                                  const XML_Char *notation) {
  tlc_xml_base_t *b = ud;
  (void)name;
  (void)is_param;
  (void)value;
  (void)value_length;
  (void)base;
  (void)sysid;
  (void)pubid;
  (void)notation;
  tlc_xml_stop(b->p, &b->rc, b->err, TLC_ESYNTAX, "entity declarations are not accepted");
}

int tlc_xml_open(tlc_xml_base_t *b, void *state, tlc_parse_err_t *err) {
  static const XML_Memory_Handling_Suite mm = { tlc_malloc, tlc_realloc, tlc_free };
  if (err != NULL)
    memset(err, 0, sizeof(*err));
  b->err = err;
  b->rc = 0;
  b->p = XML_ParserCreate_MM(NULL, &mm, NULL);
  if (b->p == NULL) {
    if (err != NULL)
      snprintf(err->reason, sizeof(err->reason), "out of memory");
    return TLC_ENOMEM;
  }
  XML_SetUserData(b->p, state);
  XML_SetStartDoctypeDeclHandler(b->p, refuse_doctype);
  XML_SetEntityDeclHandler(b->p, refuse_entity);
  XML_SetParamEntityParsing(b->p, XML_PARAM_ENTITY_PARSING_NEVER);
#if defined(XML_DTD) &&                                                                            \
    (XML_MAJOR_VERSION > 2 || (XML_MAJOR_VERSION == 2 && XML_MINOR_VERSION >= 4))
  XML_SetBillionLaughsAttackProtectionMaximumAmplification(b->p, 10.0f);
  XML_SetBillionLaughsAttackProtectionActivationThreshold(b->p, 1u << 20);
#endif
  return 0;
}
