/* rotate.c - `tlcap rotate TARGET`: has the daemon close TARGET's current segment file and start
 * a new one, then waits until the closed segment is sealed (its data file loses its .part) and
 * prints its path. It learns which segments were open, and when they are sealed, from
 * ListSegments, asked every 50 ms for at most ROTATE_WAIT_MS. Without storage, or with no
 * segment open, it rotates and prints a line saying so.
 */
#include "client/cli.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* The target's stored segments, or NULL (no storage, or a daemon without ListSegments). */
static Tlcap__ServerMessage *list_segments(tlc_client_t *c, const char *target) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListSegments ls = TLCAP__LIST_SEGMENTS__INIT;
  Tlcap__ServerMessage *m = NULL;
  char err[512];
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_SEGMENTS;
  cm.list_segments = &ls;
  ls.target = (char *)(uintptr_t)target;
  if (tlc_client_request(c, &cm, &m, err, sizeof(err)) < 0)
    return NULL;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_SEGMENTS) {
    tlc_client_msg_free(m);
    return NULL;
  }
  return m;
}

#define ROTATE_MAX_OPEN 16
#define ROTATE_WAIT_MS  60000

int tlc_cli_rotate(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__RotateTarget rt = TLCAP__ROTATE_TARGET__INIT;
  Tlcap__ServerMessage *m, *before;
  tlc_client_t *c;
  int status = 0;
  uint64_t open[ROTATE_MAX_OPEN];
  size_t nopen = 0;
  if (tlc_cli_help_only_opts(
          argc, argv,
          "usage: tlcap [--connect ADDR] rotate TARGET\n"
          "Closes TARGET's current segment file and starts a new one; waits until the closed\n"
          "segment is sealed and prints its path (nothing when no segment was open).\n",
          &status))
    return status;
  if (tlc_cli_operands(argc, 1, 1, "tlcap rotate TARGET") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((c = tlc_cli_connect("tlcap rotate", &status)) == NULL)
    return status;
  /* the open segment(s) now: what the rotation closes */
  if ((before = list_segments(c, argv[1])) != NULL) {
    for (size_t i = 0; i < before->segments->n_segments && nopen < ROTATE_MAX_OPEN; i++)
      if (before->segments->segments[i]->state == TLCAP__SEGMENT_INFO__STATE__OPEN)
        open[nopen++] = before->segments->segments[i]->seq;
    tlc_client_msg_free(before);
  }
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_ROTATE;
  cm.rotate = &rt;
  rt.target = argv[1];
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    goto done;
  tlc_client_msg_free(m);
  if (nopen == 0) {
    printf("rotated %s (no open segment)\n", argv[1]);
    goto done;
  }
  /* wait for the seal: the closed segments' data files lose their .part */
  for (int waited = 0;; waited += 50) {
    Tlcap__ServerMessage *after = list_segments(c, argv[1]);
    size_t done_n = 0;
    if (after == NULL) {
      fprintf(stderr, "tlcap: %s: segments of %s no longer listed\n", tlc_client_addr(c), argv[1]);
      status = EXIT_BAD;
      goto done;
    }
    for (size_t k = 0; k < nopen; k++) {
      int found = 0, sealed = 0;
      for (size_t i = 0; i < after->segments->n_segments; i++) {
        const Tlcap__SegmentInfo *x = after->segments->segments[i];
        if (x->seq == open[k]) {
          found = 1;
          sealed = x->state != TLCAP__SEGMENT_INFO__STATE__OPEN &&
                   x->state != TLCAP__SEGMENT_INFO__STATE__SEALING;
        }
      }
      done_n += !found || sealed; /* gone: deleted by retention meanwhile */
    }
    if (done_n == nopen) {
      for (size_t k = 0; k < nopen; k++)
        for (size_t i = 0; i < after->segments->n_segments; i++)
          if (after->segments->segments[i]->seq == open[k])
            printf("%s\n", after->segments->segments[i]->path);
      tlc_client_msg_free(after);
      break;
    }
    tlc_client_msg_free(after);
    if (waited >= ROTATE_WAIT_MS) {
      fprintf(stderr, "tlcap: %s: %s: the closed segment was not sealed within %d s\n",
              tlc_client_addr(c), argv[1], ROTATE_WAIT_MS / 1000);
      status = EXIT_BAD;
      goto done;
    }
    {
      struct timespec ts = { 0, 50 * 1000000L };
      nanosleep(&ts, NULL);
    }
  }
done:
  tlc_client_free(c);
  return status;
}
