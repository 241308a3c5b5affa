/* reset.c - `tlcap reset TARGET` and `tlcap forget TARGET` (SPEC 10): a target's statistics
 * start afresh (a gap; its stored segments stay), or a disconnected target leaves the daemon's
 * table and every view (its kept checkpoint and mapping are deleted so that it does not come
 * back at a restart; its stored segments stay until retention takes them). One request each
 * (ResetTarget, ForgetTarget); the daemon's refusal is printed and the exit status is 1.
 */
#include "client/cli.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

int tlc_cli_reset(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ResetTarget rt = TLCAP__RESET_TARGET__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  int status = 0;
  if (tlc_cli_help_only_opts(
          argc, argv,
          "usage: tlcap [--connect ADDR] reset TARGET\n"
          "Starts TARGET's statistics afresh: every area, context and counter from zero, a gap\n"
          "where the old statistics end. Its stored segments stay (history still covers the\n"
          "time before the reset). A connected target goes on into the new statistics.\n",
          &status))
    return status;
  if (tlc_cli_operands(argc, 1, 1, "tlcap reset TARGET") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((c = tlc_cli_connect("tlcap reset", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_RESET;
  cm.reset = &rt;
  rt.target = argv[1];
  if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
    tlc_client_msg_free(m);
    printf("reset %s\n", argv[1]);
  }
  tlc_client_free(c);
  return status;
}

int tlc_cli_forget(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ForgetTarget ft = TLCAP__FORGET_TARGET__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  int status = 0;
  if (tlc_cli_help_only_opts(
          argc, argv,
          "usage: tlcap [--connect ADDR] forget TARGET\n"
          "Removes a disconnected TARGET from the daemon's table and every view (targets,\n"
          "top, the dashboard, /metrics). Its checkpoint and kept mapping are deleted, so it\n"
          "does not come back at a restart; its stored segments stay until retention takes\n"
          "them. A connected target is refused; a target that connects again later starts\n"
          "afresh.\n",
          &status))
    return status;
  if (tlc_cli_operands(argc, 1, 1, "tlcap forget TARGET") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((c = tlc_cli_connect("tlcap forget", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_FORGET;
  cm.forget = &ft;
  ft.target = argv[1];
  if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
    tlc_client_msg_free(m);
    printf("forgot %s\n", argv[1]);
  }
  tlc_client_free(c);
  return status;
}
