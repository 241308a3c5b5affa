/* fuzz_aprof.c - libFuzzer harness for the aprof report reader and its JSON view: any bytes are
 * parsed with small caps; must never crash or leak, and a report it accepts must satisfy the
 * invariants aprof.c promises (points grouped by owner, tree links in range). */
#include "base/alloc.h"
#include "formats/aprof.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_aprof_t a;
  tlc_parse_err_t e;
  tlc_aprof_init(&a);
  a.max_routines = 1000;
  a.max_points = 4000;
  a.max_contexts = 1000;
  if (tlc_aprof_parse(&a, (const char *)data, size, &e) == 0) {
    tlc_out_t o;
    size_t i, n = 0;
    char *s;
    for (i = 0; i < a.nroutines; i++) {
      const tlc_aprof_routine_t *r = &a.routines[i];
      size_t k;
      if (r->first_point + r->npoints > a.npoints)
        abort();
      for (k = 0; k < r->npoints; k++)
        if (a.points[r->first_point + k].owner != r->id)
          abort();
      n += r->npoints;
    }
    if (n != a.npoints)
      abort();
    for (i = 0; i < a.ncontexts; i++) {
      const tlc_aprof_ctx_t *c = &a.contexts[i];
      if (c->routine >= a.nroutines || (c->parent != SIZE_MAX && c->parent >= a.ncontexts) ||
          c->first_point + c->npoints > a.ncpoints)
        abort();
    }
    tlc_out_init(&o, 1u << 24, NULL, NULL);
    if (tlc_aprof_to_json(&a, &o) != 0)
      abort();
    s = tlc_out_take(&o, &n);
    tlc_free(s);
    tlc_out_fini(&o);
  } else if (e.reason[0] == '\0' || e.line == 0) {
    abort(); /* every failure names its line and reason */
  }
  tlc_aprof_fini(&a);
  return 0;
}
