/* violations.c - `tlcap violations TARGET [--budget NAME] [--recent N] [--json]` (SPEC 13,
 * docs/budgets.md "Served"): the target's timing budgets and their violations as the daemon
 * counted them (a ViolationsRequest), as a table (vfmt.c) or the reply's JSON document.
 */
#include "client/cli.h"
#include "client/vfmt.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tlc_cli_violations(int argc, char **argv) {
  static const struct option lo[] = { { "budget", required_argument, NULL, 'b' },
                                      { "recent", required_argument, NULL, 'r' },
                                      { "json", no_argument, NULL, 'j' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ViolationsRequest vr = TLCAP__VIOLATIONS_REQUEST__INIT;
  Tlcap__ServerMessage *m;
  const char *budget = NULL;
  unsigned long recent = 0;
  tlc_client_t *c;
  int json = 0, opt, status = 0;
  char *end;
  tlc_cli_opt_reset();
  while ((opt = tlc_cli_next_opt(argc, argv, ":h", lo)) != -1) {
    switch (opt) {
    case '?':
      return EXIT_USAGE;
    case 'h':
      printf("usage: tlcap [--connect ADDR] violations TARGET [--budget NAME] [--recent N] "
             "[--json]\n"
             "The target's timing budgets (docs/budgets.md) and their violations, counted\n"
             "exactly by the daemon: a row per budget, area and context with the total, the\n"
             "worst and the last violation (value, and when: wall clock, or target time) and\n"
             "REF, v:BUDGET:N, the worst one's name for `tlcap around TARGET REF`. --budget: one\n"
             "budget; --recent N: at most the newest N kept violations per budget (default: all\n"
             "kept); --json: the whole reply (every kept violation, its times and stored\n"
             "location).\n");
      return 0;
    case 'b':
      budget = optarg;
      break;
    case 'r':
      recent = strtoul(optarg, &end, 10);
      if (*optarg == 0 || *end != 0 || recent > UINT32_MAX) {
        fprintf(stderr, "tlcap violations: --recent %s: a count expected\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'j':
      json = 1;
      break;
    default:
      break;
    }
  }
  if (tlc_cli_operands(argc, 1, 1, "tlcap violations TARGET [--budget NAME] [--json]") < 0)
    return EXIT_USAGE;
  if ((c = tlc_cli_connect("tlcap violations", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_VIOLATIONS;
  cm.violations = &vr;
  vr.target = argv[optind];
  vr.budget = (char *)(uintptr_t)(budget != NULL ? budget : "");
  vr.max_recent = (uint32_t)recent;
  if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
    if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_VIOLATIONS) {
      fprintf(stderr, "tlcap violations: %s: unexpected reply\n", tlc_client_addr(c));
      status = EXIT_BAD;
    } else if (json) {
      tlc_cli_json_t j;
      tlc_cli_vfmt_json(tlc_cli_json_begin(&j, 0), m->violations);
      tlc_cli_json_end(&j);
    } else {
      tlc_out_t o;
      tlc_out_init(&o, 0, tlc_cli_write_fd_cb, stdout);
      if (m->violations->n_budgets == 0)
        tlc_out_printf(&o, "no budget applies to %s\n", m->violations->target);
      else
        tlc_cli_vfmt_table(&o, m->violations);
      if (tlc_out_fini(&o) != 0)
        status = EXIT_BAD;
      fflush(stdout);
    }
    tlc_client_msg_free(m);
  }
  tlc_client_free(c);
  return status;
}
