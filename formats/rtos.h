/* rtos.h - packed RTOS task variables (SPEC section 2, "Packed task variables") and winIDEA's
 * RTOS description, the XML file that tells the profiler how to read them.
 *
 * A packed task variable holds a task id and a task state in one value, as iSYSTEM's FreeRTOS
 * example writes `isystem_trace = (state << 16) + task tag` (blocking reason in bits 24-31):
 *
 *    31        24 23        16 15                     0
 *   +------------+------------+------------------------+
 *   |  (ignored) |   state    |        task id         |   id_mask 0x0000FFFF
 *   +------------+------------+------------------------+   state_mask 0x00FF0000
 *
 * task = v & id_mask, state = (v & state_mask) >> shift (shift: state_mask's lowest set bit);
 * bits outside both masks are ignored. A state in run[] means the task runs (it becomes its
 * core's current context); a state in stop[] (or, with stop_all, any state not in run[]) ends
 * the run of the core's current task when it is that task; any other state changes nothing.
 *
 * The RTOS description (winIDEA's `RTOS_description_0.xsd`, sample in
 * ../shared/samples/winidea/FreeRTOSProfiler.xml) is read with expat, as mapping.c reads XML:
 *
 *   <OperatingSystem>
 *     <Types><TypeEnum><Name>T</Name><Enum><Name>IDLE</Name><Value>0</Value></Enum>...
 *     <Profiler><Object><Type>T</Type>             <- the thread TypeEnum: task names
 *       <TaskState><MaskID>0x0000FFFF</MaskID><MaskState>0x00FF0000</MaskState>
 *         <Type>S</Type>                            <- the state TypeEnum: state values
 *         <StateInfo><Name>RUNNING</Name><Property>Run</Property></StateInfo>
 *         <StateInfo><Name>READY</Name><Property>Terminate</Property></StateInfo> ...
 *
 * The first <Object> with a <TaskState> is used. A StateInfo's Name is looked up in the state
 * TypeEnum (a number is taken as the value itself); Property Run goes to run[], Terminate to
 * stop[] (stop_all 0: states the file does not list change nothing); other properties are
 * ignored. Enum values are decimal or 0x-hex. DOCTYPE and entity declarations are refused.
 * Pure: no I/O; the caller reads the file.
 */
#ifndef TLC_RTOS_H
#define TLC_RTOS_H

#include "formats/mapping.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_CTXPACK_MAX 16 /* state values per list */

typedef struct tlc_ctxpack {
  uint64_t id_mask, state_mask; /* both 0: not packed (the whole value is the task) */
  uint8_t nrun, nstop;
  uint8_t stop_all; /* 1: every state not in run[] stops (context_stopped not given) */
  uint8_t shift;    /* lowest set bit of state_mask (tlc_ctxpack_finish) */
  uint64_t run[TLC_CTXPACK_MAX], stop[TLC_CTXPACK_MAX];
} tlc_ctxpack_t;

enum { TLC_CTXPACK_NONE = 0, TLC_CTXPACK_RUN = 1, TLC_CTXPACK_STOP = 2 };

/* Not packed; run = {1}, stop_all (the SPEC's defaults once masks are set). */
void tlc_ctxpack_default(tlc_ctxpack_t *p);
/* Sets shift from state_mask. Call after changing the masks. */
void tlc_ctxpack_finish(tlc_ctxpack_t *p);
/* 1 when both masks are set. */
static inline int tlc_ctxpack_on(const tlc_ctxpack_t *p) {
  return p->id_mask != 0 && p->state_mask != 0;
}
/* What value v means: TLC_CTXPACK_RUN, _STOP or _NONE; *task = v & id_mask. */
static inline int tlc_ctxpack_classify(const tlc_ctxpack_t *p, uint64_t v, uint64_t *task) {
  uint64_t s = (v & p->state_mask) >> p->shift;
  unsigned i;
  *task = v & p->id_mask;
  for (i = 0; i < p->nrun; i++)
    if (p->run[i] == s)
      return TLC_CTXPACK_RUN;
  if (p->stop_all)
    return TLC_CTXPACK_STOP;
  for (i = 0; i < p->nstop; i++)
    if (p->stop[i] == s)
      return TLC_CTXPACK_STOP;
  return TLC_CTXPACK_NONE;
}
/* Parses a list of state values "1", "2,4,5" or "0x2 0x5" (hex, optional 0x; separated by
 * commas and/or blanks) into out[0..*n) (at most TLC_CTXPACK_MAX). Returns 0 or TLC_EINVAL
 * (empty, not hex, too many). */
int tlc_ctxpack_parse_list(const char *s, uint64_t *out, uint8_t *n);
/* Parses one hex mask (optional 0x, nonzero). Returns 0 or TLC_EINVAL. */
int tlc_ctxpack_parse_mask(const char *s, uint64_t *out);

/* Reads a winIDEA RTOS description buf[0..len): fills *p (masks, run, stop, stop_all 0) and,
 * when names is not NULL, adds each thread Enum (value -> name) to names' CONTEXTS. Returns 0,
 * or a negative error with *err filled (line, byte offset, reason): TLC_ESYNTAX (not XML, no
 * <TaskState>, a mask missing or zero, a StateInfo naming no state, a value not a number),
 * TLC_ELIMIT (more than TLC_CTXPACK_MAX states in a list or StateInfos in all, 65,536 enums, a text
 * longer than 255 bytes, nesting deeper than 64), TLC_ENOMEM. */
int tlc_rtos_parse(const char *buf, size_t len, tlc_ctxpack_t *p, tlc_mapping_t *names,
                   tlc_parse_err_t *err);

#endif
