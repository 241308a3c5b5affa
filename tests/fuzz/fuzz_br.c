/* fuzz_br.c - libFuzzer harness for the BR profiler file reader, its JSON view and emitters:
 * any bytes are parsed with small caps; must never crash or leak. A profile it accepts is
 * written back with the emitters (modules first, then every entry) and must read back with the
 * same entries, positions, times, names and backtraces. */
#include "base/alloc.h"
#include "formats/br.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void emit_frame_annotations(tlc_out_t *o, const tlc_br_t *b, const tlc_br_frame_t *f) {
  if (f->function != TLC_BR_NONAME)
    tlc_br_write_function(o, b->names[f->function]);
  if (f->flags & TLC_BR_F_GOSUB)
    tlc_br_write_gosub(o);
  if (f->flags & TLC_BR_F_MAIN)
    tlc_br_write_main(o);
}

static const char *fname(const tlc_br_t *b, uint32_t k) {
  return k == TLC_BR_NONAME ? "(none)" : b->names[k];
}

static int same_frame(const tlc_br_t *a, const tlc_br_frame_t *x, const tlc_br_t *b,
                      const tlc_br_frame_t *y) {
  return x->module == y->module && x->line == y->line && x->clause == y->clause &&
         x->flags == y->flags && (x->function == TLC_BR_NONAME) == (y->function == TLC_BR_NONAME) &&
         strcmp(fname(a, x->function), fname(b, y->function)) == 0;
}

static void round_trip(const tlc_br_t *b) {
  tlc_out_t o;
  tlc_br_t c;
  tlc_parse_err_t e;
  size_t i, j, len;
  char *bytes;
  tlc_out_init(&o, 0, NULL, NULL);
  for (i = 0; i < b->nmodules; i++)
    tlc_br_write_module(&o, b->modules[i].number, b->modules[i].file);
  for (i = 0; i < b->nlines; i++) {
    const tlc_br_line_t *l = &b->lines[i];
    tlc_br_write_current_line(&o, l->at.module, l->at.line, l->at.clause);
    emit_frame_annotations(&o, b, &l->at);
    if (l->has_time)
      tlc_br_write_time(&o, l->time_ns);
    for (j = 0; j < l->nbt; j++) {
      const tlc_br_frame_t *f = &b->frames[l->first_bt + j];
      tlc_br_write_backtrace(&o, f->module, f->line, f->clause);
      emit_frame_annotations(&o, b, f);
    }
    tlc_br_write_end(&o);
  }
  bytes = tlc_out_take(&o, &len);
  if (bytes == NULL)
    abort();
  tlc_br_init(&c);
  if (tlc_br_parse(&c, (const uint8_t *)bytes, len, &e) != 0 || c.nlines != b->nlines ||
      c.nmodules != b->nmodules || c.nframes != b->nframes)
    abort();
  for (i = 0; i < b->nmodules; i++)
    if (strcmp(tlc_br_module_file(&c, b->modules[i].number), b->modules[i].file) != 0)
      abort();
  for (i = 0; i < b->nlines; i++) {
    const tlc_br_line_t *x = &b->lines[i], *y = &c.lines[i];
    if (!same_frame(b, &x->at, &c, &y->at) || x->has_time != y->has_time ||
        x->time_ns != y->time_ns || x->nbt != y->nbt)
      abort();
    for (j = 0; j < x->nbt; j++)
      if (!same_frame(b, &b->frames[x->first_bt + j], &c, &c.frames[y->first_bt + j]))
        abort();
  }
  tlc_br_fini(&c);
  tlc_free(bytes);
  tlc_out_fini(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_br_t b;
  tlc_parse_err_t e;
  tlc_br_init(&b);
  b.max_lines = 4096;
  b.max_frames = 4096;
  if (tlc_br_parse(&b, data, size, &e) == 0) {
    tlc_out_t o;
    size_t n;
    char *s;
    tlc_out_init(&o, 1u << 24, NULL, NULL);
    if (tlc_br_to_json(&b, &o) != 0)
      abort();
    s = tlc_out_take(&o, &n);
    tlc_free(s);
    tlc_out_fini(&o);
    round_trip(&b);
  } else if (e.reason[0] == '\0') {
    abort();
  }
  tlc_br_fini(&b);
  return 0;
}
