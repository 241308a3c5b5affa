/* xmlrun.h - feeding a whole buffer to an expat parser, as every XML reader of formats/ does
 * (the mapping import: mapping.c; winIDEA RTOS descriptions: rtos.c), and the parser they
 * all create, with the same refusals.
 *
 * Pure: the parser, its handlers and their user data are the caller's.
 */
#ifndef TLC_XMLRUN_H
#define TLC_XMLRUN_H

#include "formats/mapping.h" /* tlc_parse_err_t */

#include <expat.h>
#include <stddef.h>

/* What every reader's handler state starts with: expat's user data is that state, and so, cast,
 * this (the refusals below need the parser, the error to fill and the code to return). */
typedef struct tlc_xml_base {
  XML_Parser p;
  tlc_parse_err_t *err;
  int rc; /* set by a handler's refusal */
} tlc_xml_base_t;

/* Creates b->p (tlc's allocator) with user data `state`, whose first member is b, and err (may
 * be NULL) cleared and kept in b. The parser refuses document type declarations and entity
 * declarations (TLC_ESYNTAX: nothing can be expanded), never reads parameter entities and has
 * expat's amplification limits set. Returns 0, or TLC_ENOMEM with err saying so. */
int tlc_xml_open(tlc_xml_base_t *b, void *state, tlc_parse_err_t *err);

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
