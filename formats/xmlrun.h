/* xmlrun.h - feeding a whole buffer to an expat parser, as every XML reader of formats/ does
 * (the mapping import: mapping.c; winIDEA RTOS descriptions: rtos.c).
 *
 * Pure: the parser, its handlers and their user data are the caller's.
 */
#ifndef TLC_XMLRUN_H
#define TLC_XMLRUN_H

#include "formats/mapping.h" /* tlc_parse_err_t */

#include <expat.h>
#include <stddef.h>

/* Parses buf[0..len) with p, in slices of at most 1 MiB (expat takes an int length), the last
 * one final. A handler that stops the parser (XML_StopParser) sets *handler_rc first (and err,
 * its reason). Returns 0, *handler_rc when a handler stopped it, TLC_ENOMEM or TLC_ESYNTAX with
 * err (may be NULL) naming the line, byte offset and expat's reason. */
int tlc_xml_run(XML_Parser p, const char *buf, size_t len, const int *handler_rc,
                tlc_parse_err_t *err);

/* A handler's refusal: unless *rc is set already, sets it to `code`, err (may be NULL) to the
 * parser's line and byte offset and the formatted reason, and stops p. */
void tlc_xml_stop(XML_Parser p, int *rc, tlc_parse_err_t *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

#endif
