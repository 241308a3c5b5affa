/* replay.c - `tlcapd replay`: capture files in, statistics and exports out.
 *
 *   tlcapd replay FILE... [--format bin10|bin11|evlog|aprof|br|auto] [--mapping FILE]
 *                         [--context-area HANDLE] [--export text1|xml|aprof|br|json|bin11|
 *                         bin10|evlog] [--text1-format ENTRY=FORMAT]... [--output PATH]
 *                         [--from NS] [--to NS] [--budgets FILE]
 *
 * Stream files (bin10, bin11, evlog) are decoded strictly, in the order given, as one capture
 * (consecutive segments of one target): the decoder starts afresh at each file, the statistics
 * carry on. Pass 1 feeds the statistics engine; exporters that write a timeline pull a second
 * pass through a tlc_timeline_t that decodes the files again, so memory stays bounded whatever
 * the capture's size. Native exports (bin10, bin11, evlog) skip pass 1.
 *
 * Bad input: the first invalid record stops decoding; everything before it is still counted
 * and exported, the message names file, byte offset and reason, and the exit status is 1. A
 * truncated last record is reported the same way. Usage errors exit 2.
 *
 * With --budgets FILE (SPEC 13, docs/budgets.md) it is a gate: every sample is tested against
 * the budgets as the engine closes it (budget/budget.h), the violations are printed (a table,
 * or --export json) instead of the statistics, and the exit status is 3 when there is one, 0
 * when none (1 bad input, 2 usage or a bad budget file, whatever the violations).
 *
 * aprof reports and BR profiler files are read whole and printed as JSON (--export json, their
 * default), so a user can check what such a file holds.
 *
 * The gate is in replay_gate.c, --around in replay_moment.c, the inputs (segments, formats, the
 * stream) in replay_input.c; replay-int.h is what they share.
 */
#include "daemon/replay.h"
#include "daemon/replay-int.h"

#include "base/fileread.h"

#include "budget/budget.h"
#include "config/config.h"
#include "engine/engine.h"
#include "history/history.h"
#include "history/moment.h"
#include "continuity/ckfile.h"
#include "store/seg/segread.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/aprof.h"
#include "formats/aprofw.h"
#include "formats/budget.h"
#include "formats/br.h"
#include "formats/brw.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "formats/evmap.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "formats/timeline.h"
#include "formats/when.h"
#include "formats/xml.h"
#include "tlc_version.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

static const char *const export_names[] = { "text1", "xml",   "aprof", "br",
                                            "json",  "bin11", "bin10", "evlog" };

static void usage(FILE *to) {
  fprintf(to,
          "usage: tlcapd replay FILE... [--format bin10|bin11|evlog|aprof|br|auto]\n"
          "                     [--mapping FILE] [--context-area HANDLE]\n"
          "                     [--context-id-mask HEX --context-state-mask HEX]\n"
          "                     [--context-running HEX,...] [--context-stopped HEX,...]\n"
          "                     [--context-rtos FILE.xml]\n"
          "                     [--export text1|xml|aprof|br|json|bin11|bin10|evlog]\n"
          "                     [--text1-format ENTRY=FORMAT]... [--output PATH]\n"
          "                     [--from NS] [--to NS]\n"
          "       tlcapd replay --state-dir DIR --target NAME [--since T] [--until T] "
          "[options]\n"
          "       tlcapd replay --state-dir DIR --target NAME --around T [--span DUR] "
          "[--export text1|json|bin11|bin10|evlog]\n"
          "                     [--xml-timeline inline|bin11|bin10|none] [--no-indent]\n"
          "                     [--budgets FILE]\n"
          "Decodes capture files and writes their statistics and timeline (--export\n"
          "defaults to text1; aprof and BR inputs are printed as json, their only export).\n"
          "ENTRY is InfoEntry, ContextEntry, MappingEntry, StatisticsEntry or TimelineEntry.\n"
          "--from/--to keep events whose time (ns) lies in [from, to].\n"
          "--context-id-mask/--context-state-mask read the --context-area value as a task\n"
          "and its state (running states: --context-running, default 1); --context-rtos\n"
          "reads them and the task names from a winIDEA RTOS description (docs/rtos-contexts.md).\n"
          "--state-dir/--target replay a target's stored segments; T is ns:N (target time in\n"
          "the latest clock epoch: events with since <= t < until), epoch:K:N (epoch K, from 0\n"
          "at the oldest segment), RFC 3339 UTC or -2h (wall clock: the segments\n"
          "that arrived in the range).\n"
          "--budgets FILE tests every sample against the [budget NAME] sections of FILE and\n"
          "prints the violations (--export text1 or json) instead of the statistics: exit\n"
          "status 3 when there is one, 0 when none (docs/budgets.md).\n"
          "--around T writes the stored events whose time lies within --span (default 10ms;\n"
          "units ns, us, ms, s, m, h) of T, every core and context: Text1 with its TIMELINE,\n"
          "JSON (the events and their statistics) or a native capture. T may be a violation,\n"
          "v:BUDGET:N (with --budgets FILE: the budgets run over the stored segments first),\n"
          "then the events from its start - span to its end + span; or an extreme,\n"
          "max:KIND:AREA[@CONTEXT] or min:... (KIND net, gross, call, period or outside;\n"
          "docs/budgets.md): the statistics of every stored segment give its sample first.\n"
          "--xml-timeline bin11|bin10 writes the XML timeline to OUTPUT.BIN (needs --output).\n"
          "Short options: -f (--format), -m (--mapping), -e (--export), -o (--output),\n"
          "-h (--help), -V (--version).\n"
          "Exit status: 0 success, 1 bad input, 2 usage, 3 budget violations (--budgets).\n");
}

/* Long options; short ones where conventional (-o, -f, -e, -m, -h, -V). */
static const struct option replay_opts[] = { { "format", required_argument, NULL, 'f' },
                                             { "mapping", required_argument, NULL, 'm' },
                                             { "context-area", required_argument, NULL, 'a' },
                                             { "context-id-mask", required_argument, NULL, 'I' },
                                             { "context-state-mask", required_argument, NULL, 'M' },
                                             { "context-running", required_argument, NULL, 'R' },
                                             { "context-stopped", required_argument, NULL, 'P' },
                                             { "context-rtos", required_argument, NULL, 'O' },
                                             { "export", required_argument, NULL, 'e' },
                                             { "text1-format", required_argument, NULL, 't' },
                                             { "output", required_argument, NULL, 'o' },
                                             { "from", required_argument, NULL, 'F' },
                                             { "to", required_argument, NULL, 'T' },
                                             { "xml-timeline", required_argument, NULL, 'x' },
                                             { "no-indent", no_argument, NULL, 'n' },
                                             { "help", no_argument, NULL, 'h' },
                                             { "version", no_argument, NULL, 'V' },
                                             { "state-dir", required_argument, NULL, 'S' },
                                             { "target", required_argument, NULL, 'G' },
                                             { "since", required_argument, NULL, 's' },
                                             { "until", required_argument, NULL, 'u' },
                                             { "budgets", required_argument, NULL, 'B' },
                                             { "around", required_argument, NULL, 0x300 },
                                             { "span", required_argument, NULL, 0x301 },
                                             { NULL, 0, NULL, 0 } };

static int parse_i64(const char *s, int64_t *v) {
  char *end;
  long long x;
  errno = 0;
  x = strtoll(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0')
    return -1;
  *v = x;
  return 0;
}

/* Reads a whole (small) file: aprof/BR reports and mapping files, up to RP_MAX_FILE_TEXT. */
static int read_all(const char *path, char **data, size_t *len) {
  return tlc_file_read(path, RP_MAX_FILE_TEXT, data, len);
}

static int write_file_cb(void *ud, const void *buf, size_t len) {
  FILE *f = ud;
  if (fwrite(buf, 1, len, f) != len)
    return TLC_EIO;
  return 0;
}

/* aprof and BR inputs: read whole, print what they hold as JSON. */
static int replay_report_file(rp_t *rp, FILE *out, int is_aprof) {
  size_t i;
  int status = 0;
  if (rp->export_ != EX_JSON && rp->export_given) {
    fprintf(stderr, "tlcapd replay: %s input can only be exported as json (--export json)\n",
            is_aprof ? "aprof" : "br");
    return 2;
  }
  for (i = 0; i < rp->nfiles; i++) {
    char *data = NULL;
    size_t len = 0;
    tlc_out_t o;
    tlc_parse_err_t pe;
    int r = read_all(rp->files[i], &data, &len);
    if (r < 0) {
      fprintf(stderr, "tlcapd replay: %s: %s\n", rp->files[i], tlc_strerror(r));
      return 1;
    }
    memset(&pe, 0, sizeof(pe));
    tlc_out_init(&o, 0, write_file_cb, out);
    if (is_aprof) {
      tlc_aprof_t a;
      tlc_aprof_init(&a);
      r = tlc_aprof_parse(&a, data, len, &pe);
      if (r == 0)
        r = tlc_aprof_to_json(&a, &o);
      else
        fprintf(stderr, "tlcapd replay: %s: line %" PRIu64 ": %s\n", rp->files[i], pe.line,
                pe.reason);
      tlc_aprof_fini(&a);
    } else {
      tlc_br_t b;
      tlc_br_init(&b);
      r = tlc_br_parse(&b, (const uint8_t *)data, len, &pe);
      if (r == 0)
        r = tlc_br_to_json(&b, &o);
      else
        fprintf(stderr, "tlcapd replay: %s: byte %" PRIu64 ": %s\n", rp->files[i], pe.offset,
                pe.reason);
      tlc_br_fini(&b);
    }
    if (tlc_out_fini(&o) < 0 && r == 0)
      r = TLC_EIO;
    tlc_free(data);
    if (r < 0)
      status = 1;
  }
  return status;
}

/* With --format auto: "aprof" or "br" when the first file is such a report (and no stream
 * format fits it, since a bin1x record can look like a BR record), else "auto". */
static const char *sniff_report(const char *path) {
  uint8_t head[RP_HEAD];
  char why[160];
  int r = tlc__rp_read_head(path, head);
  size_t n = r > 0 ? (size_t)r : 0;
  if (r < 0)
    return "auto"; /* tlc__rp_resolve_formats reports it */
  if (tlc_dec_detect(head, n, why, sizeof(why)) != TLC_FMT_NONE)
    return "auto";
  if (tlc_aprof_sniff((const char *)head, n)) {
    fprintf(stderr, "tlcapd replay: %s: format auto: aprof report\n", path);
    return "aprof";
  }
  if (tlc_br_sniff(head, n)) {
    fprintf(stderr, "tlcapd replay: %s: format auto: BR profiler file\n", path);
    return "br";
  }
  return "auto";
}

static int load_mapping(rp_t *rp) {
  char *data = NULL;
  size_t len = 0;
  tlc_parse_err_t pe;
  int r = read_all(rp->mapping_path, &data, &len);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s: %s\n", rp->mapping_path, tlc_strerror(r));
    return 1;
  }
  memset(&pe, 0, sizeof(pe));
  r = tlc_mapping_parse(&rp->mapping, data, len, &pe);
  tlc_free(data);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s: line %" PRIu64 ": %s\n", rp->mapping_path, pe.line,
            pe.reason[0] ? pe.reason : tlc_strerror(r));
    return 1;
  }
  tlc_mapping_finish(&rp->mapping);
  rp->has_mapping = 1;
  return 0;
}

/* XML, with the timeline inline or in the OUTPUT.BIN sidecar. */
static int export_xml(rp_t *rp, tlc_out_t *o, const tlc_table_t *t, tlc_timeline_t *tl) {
  tlc_out_t side;
  FILE *sf = NULL;
  char *path = NULL;
  const char *base;
  int r;
  if (rp->xml.timeline != TLC_XML_TL_BINARY)
    return tlc_xml_write(o, &rp->xml, t, rp->has_mapping ? &rp->mapping : NULL, tl, NULL);
  path = tlc_malloc(strlen(rp->output) + 5);
  if (path == NULL)
    return TLC_ENOMEM;
  strcpy(path, rp->output);
  strcat(path, ".BIN");
  sf = fopen(path, "wb");
  if (sf == NULL) {
    fprintf(stderr, "tlcapd replay: %s: %s\n", path, strerror(errno));
    tlc_free(path);
    return TLC_EIO;
  }
  base = strrchr(path, '/');
  rp->xml.sidecar_name = base ? base + 1 : path;
  tlc_out_init(&side, 0, write_file_cb, sf);
  r = tlc_xml_write(o, &rp->xml, t, rp->has_mapping ? &rp->mapping : NULL, tl, &side);
  if (tlc_out_fini(&side) < 0 && r == 0)
    r = TLC_EIO;
  if (fclose(sf) != 0 && r == 0)
    r = TLC_EIO;
  rp->xml.sidecar_name = NULL;
  tlc_free(path);
  return r;
}

/* Native exports: re-encode the timeline. */
static int export_native(rp_t *rp, tlc_hist_stream_t *s, tlc_out_t *o) {
  tlc_format_t to = rp->export_ == EX_BIN11   ? TLC_FMT_BIN11
                    : rp->export_ == EX_BIN10 ? TLC_FMT_BIN10
                                              : TLC_FMT_EVLOG;
  const tlc_event_t *evs;
  int n, i, r = 0;
  tlc_evlog_enc_t enc;
  if (to == TLC_FMT_EVLOG) {
    if (rp->fmt != TLC_FMT_EVLOG) {
      fprintf(stderr,
              "tlcapd replay: --export evlog needs evlog input (a %s capture has no "
              "evlog strings)\n",
              tlc_format_name(rp->fmt));
      return 2;
    }
    r = tlc_evlog_enc_init(&enc, NULL);
    if (r < 0)
      return 1;
  }
  while ((n = tlc_hist_stream_next(s, &evs)) > 0) {
    for (i = 0; i < n; i++) {
      const tlc_event_t *ev = &evs[i];
      if (to == TLC_FMT_EVLOG) {
        if (ev->flags & TLC_EVF_SYNTH)
          continue; /* S/R synthesised by the mapping are not items */
        r = tlc_evlog_enc_add(&enc, ev, o);
        if (r < 0)
          break;
      } else {
        uint8_t rec[TLC_BIN1X_RECORD];
        tlc_event_t e = *ev;
        if (ev->type > TLC_EV_WRITE)
          continue;
        if (rp->fmt != to)
          e.raw = 0; /* the received word belongs to another layout */
        tlc_bin1x_encode(to, &e, rec);
        tlc_out_write(o, rec, sizeof(rec));
      }
    }
    if (r < 0 || o->err)
      break;
  }
  if (to == TLC_FMT_EVLOG) {
    if (r == 0)
      r = tlc_evlog_enc_flush(&enc, o);
    tlc_evlog_enc_fini(&enc);
  }
  if (n < 0 || r < 0)
    return 1;
  return 0;
}

/* --context-area HANDLE (hex). */
static int set_context_area(rp_t *rp, const char *v) {
  char *end;
  unsigned long h;
  errno = 0;
  h = strtoul(v, &end, 16);
  if (errno != 0 || end == v || *end != '\0' || h > 0xFFFFFFFFul) {
    fprintf(stderr, "tlcapd replay: --context-area expects a hex handle, got %s\n", v);
    return 2;
  }
  rp->has_ctx_area = 1;
  rp->ctx_area = (uint32_t)h;
  return RP_GO;
}

/* --context-id-mask, --context-state-mask, --context-running, --context-stopped. */
static int set_pack(rp_t *rp, int c, const char *v) {
  int r;
  const char *name = c == 'I'   ? "context-id-mask"
                     : c == 'M' ? "context-state-mask"
                     : c == 'R' ? "context-running"
                                : "context-stopped";
  if (c == 'I' || c == 'M')
    r = tlc_ctxpack_parse_mask(v, c == 'I' ? &rp->pack.id_mask : &rp->pack.state_mask);
  else
    r = tlc_ctxpack_parse_list(v, c == 'R' ? rp->pack.run : rp->pack.stop,
                               c == 'R' ? &rp->pack.nrun : &rp->pack.nstop);
  if (r != 0) {
    fprintf(stderr, "tlcapd replay: --%s expects %s, got %s\n", name,
            c == 'I' || c == 'M' ? "a nonzero hex mask" : "hex state values separated by commas",
            v);
    return 2;
  }
  rp->pack_set |= c == 'I'   ? TLC_CFG_PK_ID
                  : c == 'M' ? TLC_CFG_PK_STATE
                  : c == 'R' ? TLC_CFG_PK_RUN
                             : TLC_CFG_PK_STOP;
  return RP_GO;
}

/* The packed task variable of the options into the engine options (after load_mapping: the
 * RTOS description's task names go into the mapping where it names no task). Returns 0 or the
 * exit status. */
static int load_pack(rp_t *rp, tlc_ctxpack_t *out) {
  tlc_cfg_tset_t ts;
  char err[400];
  memset(&ts, 0, sizeof(ts));
  ts.pack = rp->pack;
  ts.pack_set = rp->pack_set;
  ts.has_context_area = (uint8_t)rp->has_ctx_area;
  if (rp->rtos_path != NULL) {
    tlc_mapping_t names;
    tlc_mapping_init(&names);
    if (tlc_config_read_rtos(rp->rtos_path, &ts.rtos_pack, &names, err, sizeof(err)) != 0) {
      fprintf(stderr, "tlcapd replay: %s\n", err);
      tlc_mapping_fini(&names);
      return 1;
    }
    tlc_mapping_finish(&names);
    snprintf(ts.rtos, sizeof(ts.rtos), "%s", rp->rtos_path);
    for (size_t i = 0; i < names.ncontexts; i++)
      if ((!rp->has_mapping ||
           tlc_mapping_ctx_name(&rp->mapping, names.contexts[i].handle) == NULL) &&
          tlc_mapping_add_ctx(&rp->mapping, names.contexts[i].handle, names.contexts[i].name) !=
              0) {
        fprintf(stderr, "tlcapd replay: out of memory\n");
        tlc_mapping_fini(&names);
        return 1;
      }
    tlc_mapping_finish(&rp->mapping);
    rp->has_mapping = 1;
    tlc_mapping_fini(&names);
  }
  tlc_config_ctxpack(&ts, out);
  if ((out->id_mask != 0) != (out->state_mask != 0)) {
    fprintf(stderr, "tlcapd replay: --context-id-mask and --context-state-mask go together\n");
    return 2;
  }
  if ((out->id_mask != 0 || rp->pack_set != 0) && !rp->has_ctx_area) {
    fprintf(stderr, "tlcapd replay: a packed task variable (--context-rtos, --context-id-mask, "
                    "...) needs --context-area\n");
    return 2;
  }
  return 0;
}

static int set_export(rp_t *rp, const char *v) {
  size_t k;
  rp->export_given = 1;
  rp->export_ = -1;
  for (k = 0; k < sizeof(export_names) / sizeof(export_names[0]); k++)
    if (strcmp(v, export_names[k]) == 0)
      rp->export_ = (int)k;
  if (rp->export_ < 0) {
    fprintf(stderr, "tlcapd replay: unknown --export %s\n", v);
    return 2;
  }
  return RP_GO;
}

static int set_xml_timeline(rp_t *rp, const char *v) {
  if (strcmp(v, "inline") == 0) {
    rp->xml.timeline = TLC_XML_TL_INLINE;
  } else if (strcmp(v, "none") == 0) {
    rp->xml.timeline = TLC_XML_TL_NONE;
  } else if (strcmp(v, "bin11") == 0 || strcmp(v, "bin10") == 0) {
    rp->xml.timeline = TLC_XML_TL_BINARY;
    rp->xml.bin_version = tlc_format_parse(v);
  } else {
    fprintf(stderr, "tlcapd replay: --xml-timeline expects inline, bin11, bin10 or none\n");
    return 2;
  }
  return RP_GO;
}

/* --from/--to NS (name: the option's name). */
static int set_time(const char *v, const char *name, int *has, int64_t *t) {
  int64_t x;
  if (parse_i64(v, &x) < 0) {
    fprintf(stderr, "tlcapd replay: --%s expects a time in ns, got %s\n", name, v);
    return 2;
  }
  *has = 1;
  *t = x;
  return RP_GO;
}

/* One option of getopt_long's (c, its value v) into rp. */
static int set_option(rp_t *rp, int c, const char *v, char **argv) {
  char err[256];
  switch (c) {
  case 'n':
    rp->xml.indent = 0;
    return RP_GO;
  case 'h':
    usage(stdout);
    return 0;
  case 'V':
    fputs("tlcapd " TLC_VERSION "\n", stdout);
    return 0;
  case ':':
    fprintf(stderr, "tlcapd replay: %s needs a value\n", argv[optind - 1]);
    return 2;
  case '?':
    fprintf(stderr, "tlcapd replay: unknown option %s\n", argv[optind - 1]);
    usage(stderr);
    return 2;
  case 'f':
    if (strcmp(v, "auto") != 0 && strcmp(v, "aprof") != 0 && strcmp(v, "br") != 0 &&
        tlc_format_parse(v) == TLC_FMT_NONE) {
      fprintf(stderr, "tlcapd replay: unknown --format %s\n", v);
      return 2;
    }
    rp->format_opt = v;
    return RP_GO;
  case 'm':
    rp->mapping_path = v;
    return RP_GO;
  case 'a':
    return set_context_area(rp, v);
  case 'I':
  case 'M':
  case 'R':
  case 'P':
    return set_pack(rp, c, v);
  case 'O':
    rp->rtos_path = v;
    return RP_GO;
  case 'e':
    return set_export(rp, v);
  case 't':
    if (tlc_text1_set_format(&rp->t1, v, err, sizeof(err)) < 0) {
      fprintf(stderr, "tlcapd replay: %s\n", err);
      return 2;
    }
    return RP_GO;
  case 'o':
    rp->output = v;
    return RP_GO;
  case 'x':
    return set_xml_timeline(rp, v);
  case 'S':
    rp->state_dir = v;
    return RP_GO;
  case 'G':
    rp->target = v;
    return RP_GO;
  case 's':
    rp->since_s = v;
    return RP_GO;
  case 'u':
    rp->until_s = v;
    return RP_GO;
  case 'B':
    rp->budgets_path = v;
    return RP_GO;
  case 0x300:
    rp->around_s = v;
    return RP_GO;
  case 0x301:
    rp->span_s = v;
    return RP_GO;
  case 'F':
    return set_time(v, "from", &rp->has_from, &rp->from);
  case 'T':
    return set_time(v, "to", &rp->has_to, &rp->to);
  default:
    return 2;
  }
}

/* The command line into rp: the options, then the operands (FILE...) in their order. */
static int parse_options(rp_t *rp, int argc, char **argv) {
  int i, c;
  optind = 0; /* GNU: full re-initialisation */
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":hVf:m:e:o:", replay_opts, NULL)) != -1) {
    int r = set_option(rp, c, optarg, argv);
    if (r != RP_GO)
      return r;
  }
  /* getopt_long moved the operands behind the options, in their order. */
  for (i = optind; i < argc; i++)
    rp->files[rp->nfiles++] = argv[i];
  return RP_GO;
}

/* The files to replay: the operands, or with --state-dir/--target the target's segments in
 * the --since/--until range. */
static int select_inputs(rp_t *rp) {
  char err[256];
  int status;
  if ((status = tlc__rp_around(rp)) != 0) /* --around/--span: replay_moment.c */
    return status;
  if (rp->since_s != NULL || rp->until_s != NULL) {
    tlc_when_range_t range;
    if (tlc_when_range(rp->since_s, rp->until_s, tlc_when_now(), &range, err, sizeof(err)) < 0) {
      fprintf(stderr, "tlcapd replay: --%s\n", err);
      return 2;
    }
    if (rp->state_dir == NULL) {
      fprintf(stderr, "tlcapd replay: --since/--until need --state-dir and --target\n");
      return 2;
    }
  }
  if (rp->state_dir != NULL || rp->target != NULL) {
    tlc_when_range_t range;
    if (rp->state_dir == NULL || rp->target == NULL || rp->nfiles > 0) {
      fprintf(stderr, "tlcapd replay: --state-dir and --target go together, without FILEs\n");
      return 2;
    }
    if (rp->has_vref || rp->has_xref)
      memset(&range, 0, sizeof(range)); /* every segment: the gate's or the statistics' pass */
    else if (rp->has_around)
      range = rp->around.range;
    else
      (void)tlc_when_range(rp->since_s, rp->until_s, tlc_when_now(), &range, err, sizeof(err));
    if ((status = tlc__rp_history_files(rp, &range)) != 0)
      return status;
    if (rp->nfiles == 0) {
      fprintf(stderr, "tlcapd replay: %s/%s: no segment in the range\n", rp->state_dir, rp->target);
      return 1;
    }
  }
  if (rp->nfiles == 0) {
    usage(stderr);
    return 2;
  }
  return RP_GO;
}

/* --output (created here, even when a later check refuses the command line), else stdout. */
static int open_output(rp_t *rp, FILE **out) {
  if (rp->output != NULL) {
    *out = fopen(rp->output, "wb");
    if (*out == NULL) {
      fprintf(stderr, "tlcapd replay: %s: %s\n", rp->output, strerror(errno));
      return 1;
    }
  }
  if (rp->export_ == EX_XML && rp->xml.timeline == TLC_XML_TL_BINARY && rp->output == NULL) {
    fprintf(stderr,
            "tlcapd replay: --xml-timeline %s writes OUTPUT.BIN beside the XML: give "
            "--output\n",
            tlc_format_name(rp->xml.bin_version));
    return 2;
  }
  return RP_GO;
}

static int is_native_export(int export_) {
  return export_ == EX_BIN11 || export_ == EX_BIN10 || export_ == EX_EVLOG;
}

/* Pass 1: the stream's pipeline feeds its engine (handed to *e, which the caller frees after
 * the export); its snapshot and the stream's decoder counters into t. A read or decode error
 * has been told on stderr and ends the capture there: what came before it is still exported.
 * Returns 0 or a TLC_E* code (told on stderr). */
static int stats_table(tlc_hist_stream_t *s, tlc_table_t *t, tlc_engine_t **e) {
  tlc_snap_opts_t so;
  tlc_dec_counters_t total;
  const tlc_event_t *evs;
  int r;
  while (tlc_hist_stream_next(s, &evs) > 0)
    ;
  *e = tlc_pipeline_take_engine(&s->pipe); /* pass 2 (the export's timeline) reads without it */
  if (*e == NULL) {
    fprintf(stderr, "tlcapd replay: statistics: %s\n", tlc_strerror(TLC_ENOMEM));
    return TLC_ENOMEM;
  }
  memset(&so, 0, sizeof(so));
  so.windows = 1;
  so.neutral = 1;
  so.quantiles = 1;
  r = tlc_engine_snapshot(*e, t, &so);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: statistics: %s\n", tlc_strerror(r));
    return r;
  }
  tlc_hist_stream_counters(s, &total);
  t->counters.bytes = total.bytes;
  t->counters.records = total.records;
  t->counters.bytes_skipped = total.bytes_skipped;
  t->counters.resyncs = total.resyncs;
  t->counters.records_invalid = total.records_invalid;
  t->counters.truncated = total.truncated;
  t->counters.overflow_items = total.overflow_items;
  return 0;
}

/* The statistics export of table t; pass 2 reads the timeline tl. Returns 0, 1 or 2. */
static int write_stats_export(rp_t *rp, tlc_out_t *o, const tlc_table_t *t, tlc_timeline_t *tl) {
  const tlc_mapping_t *map = rp->has_mapping ? &rp->mapping : NULL;
  int r;
  switch (rp->export_) {
  case EX_TEXT1:
    r = tlc_text1_write(o, &rp->t1, t, map, tl);
    break;
  case EX_JSON:
    if (rp->has_around) /* the moment: its events, then their statistics */
      r = tlc_moment_json(o, &rp->around, rp->json_target, t, map, tl);
    else
      r = tlc_json_write(o, t, map, rp->json_target, 0);
    break;
  case EX_APROF:
    r = tlc_aprof_write(o, NULL, t, map, tl);
    break;
  case EX_BR:
    r = tlc_br_export(o, t, map);
    if (r == 0 && tlc_br_line_areas(t) == 0)
      fprintf(stderr, "tlcapd replay: the capture has no line areas (handles 1xxxxxxx): "
                      "a BR profile holds line entries only, so the export is empty\n");
    break;
  case EX_XML:
    r = export_xml(rp, o, t, tl);
    break;
  default:
    fprintf(stderr, "tlcapd replay: --export %s is not available for stream input yet\n",
            export_names[rp->export_]);
    return 2;
  }
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: export: %s\n", tlc_strerror(r));
    return 1;
  }
  return 0;
}

/* Statistics exports: pass 1 into a table, then the export (pass 2 for a timeline). */
static int export_stats(rp_t *rp, tlc_hist_stream_t *s, tlc_out_t *o) {
  tlc_engine_t *e = NULL;
  tlc_table_t t;
  tlc_timeline_t tl = tlc_hist_stream_timeline(s);
  int status = 1;
  tlc_table_init(&t);
  if (stats_table(s, &t, &e) == 0) {
    /* evlog names come from the mapping step when no mapping file was given */
    if (!rp->has_mapping && s->pipe.evmap != NULL) {
      if (tlc_evmap_export(s->pipe.evmap, &rp->mapping) == 0) {
        tlc_mapping_finish(&rp->mapping);
        rp->has_mapping = 1;
      }
    }
    s->report = 0; /* pass 2 re-reads the same bytes: errors were told once */
    status = write_stats_export(rp, o, &t, &tl);
  }
  tlc_table_fini(&t);
  if (e != NULL)
    tlc_engine_free(e);
  return status;
}

/* The target the exports name: --target, else the one every input segment's manifest names
 * (a stored segment: <base>.manifest beside its data file), else none. Names may hold '/'
 * (efl targets). */
static const char *export_target(rp_t *rp) {
  static const char *const sfx[] = { ".zst", ".part", ".txt.BIN", ".xml.BIN", ".log" };
  if (rp->target != NULL)
    return rp->target;
  rp->seg_target[0] = '\0';
  for (size_t i = 0; i < rp->nfiles; i++) {
    char base[4096], man[4200], err[200];
    size_t n = strlen(rp->files[i]);
    tlc_segread_t *sr;
    tlc_seginfo_t info;
    if (n >= sizeof(base))
      return NULL;
    memcpy(base, rp->files[i], n + 1);
    for (size_t k = 0; k < sizeof(sfx) / sizeof(sfx[0]); k++)
      if (tlc__rp_ends_with(base, sfx[k]))
        base[strlen(base) - strlen(sfx[k])] = '\0';
    snprintf(man, sizeof(man), "%s.manifest", base);
    if (access(man, R_OK) != 0 ||
        tlc_segread_open(rp->files[i], TLC_FMT_NONE, 0, &sr, err, sizeof(err)) != 0)
      return NULL;
    tlc_segread_info(sr, &info);
    tlc_segread_close(sr);
    if (info.target[0] == '\0' || (i > 0 && strcmp(info.target, rp->seg_target) != 0))
      return NULL;
    snprintf(rp->seg_target, sizeof(rp->seg_target), "%s", info.target);
  }
  return rp->seg_target[0] != '\0' ? rp->seg_target : NULL;
}

/* Stream input (bin10, bin11, evlog, segments): decoded as one capture into out. A read or
 * decode error makes the exit status 1 once what came before it is exported. */
static int replay_streams(rp_t *rp, FILE *out) {
  tlc_hist_stream_t s;
  tlc_out_t o;
  int status, r;
  status = tlc__rp_resolve_formats(rp);
  if (status != 0)
    return status;
  if (rp->mapping_path == NULL && rp->state_dir != NULL && rp->target != NULL) {
    /* the names `tlcap mapping` gave the target, as its history uses them */
    snprintf(rp->kept_map, sizeof(rp->kept_map), "%s/%s/%s", rp->state_dir, rp->target,
             TLC_MAP_NAME);
    if (access(rp->kept_map, R_OK) == 0)
      rp->mapping_path = rp->kept_map;
  }
  rp->json_target = export_target(rp); /* the JSON document's "target" */
  if (rp->mapping_path != NULL && (status = load_mapping(rp)) != 0)
    return status;
  if ((status = load_pack(rp, &rp->pack)) != 0)
    return status;
  rp->pack_set = 0; /* rp->pack is now the whole packed variable */
  if (rp->has_vref && (status = tlc__rp_vref_moment(rp)) != 0)
    return status;
  if (rp->has_xref && (status = tlc__rp_xref_moment(rp)) != 0)
    return status;
  if (rp->budgets_path != NULL && !rp->has_vref && !rp->has_xref &&
      (status = tlc__rp_gate_load(rp)) != 0)
    return status;
  /* an engine for the statistics exports (the native ones only re-encode the events) */
  r = tlc__rp_stream_init(&s, rp, rp->watch != NULL || !is_native_export(rp->export_));
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(r));
    return 1;
  }
  tlc_out_init(&o, 0, write_file_cb, out);
  if (rp->watch != NULL)
    status = tlc__rp_budget_gate(rp, &s, &o);
  else if (is_native_export(rp->export_))
    status = export_native(rp, &s, &o);
  else
    status = export_stats(rp, &s, &o);
  if (tlc_out_fini(&o) < 0 && status == 0) {
    fprintf(stderr, "tlcapd replay: %s: write error\n", rp->output ? rp->output : "stdout");
    status = 1;
  }
  tlc_hist_stream_fini(&s);
  if ((status == 0 || status == 3) && (s.bad_input || s.io_err))
    status = 1;
  return status;
}

static int replay(rp_t *rp, int argc, char **argv, FILE **out) {
  int status;
  if ((status = parse_options(rp, argc, argv)) != RP_GO)
    return status;
  if ((status = select_inputs(rp)) != RP_GO)
    return status;
  if ((status = open_output(rp, out)) != RP_GO)
    return status;
  if (strcmp(rp->format_opt, "auto") == 0)
    rp->format_opt = sniff_report(rp->files[0]);
  if (strcmp(rp->format_opt, "aprof") == 0 || strcmp(rp->format_opt, "br") == 0)
    return replay_report_file(rp, *out, rp->format_opt[0] == 'a');
  return replay_streams(rp, *out);
}

int tlc_replay_main(int argc, char **argv) {
  rp_t rp;
  int status;
  FILE *out = stdout;

  memset(&rp, 0, sizeof(rp));
  rp.format_opt = "auto";
  rp.export_ = EX_TEXT1;
  tlc_text1_opts_default(&rp.t1);
  tlc_xml_opts_default(&rp.xml);
  tlc_mapping_init(&rp.mapping);
  tlc_tbudget_set_init(&rp.budgets);
  rp.files = tlc_calloc((size_t)argc, sizeof(char *));
  if (rp.files == NULL)
    return 1;
  status = replay(&rp, argc, argv, &out);
  if (out != stdout && out != NULL && fclose(out) != 0 && status == 0)
    status = 1;
  tlc_mapping_fini(&rp.mapping);
  tlc_bwatch_free(rp.watch);
  tlc_tbudget_set_fini(&rp.budgets);
  if (rp.hf.files != rp.files)
    tlc_free(rp.files);
  tlc_hist_files_fini(&rp.hf);
  return status;
}
