/* efl_app.c - a small EFL application for the efl_debugd integration tests.
 *
 *   efl_app [--no-workaround] [--threads N] [--reps R] [--auto]
 *
 * It runs an ecore main loop, so it is an ordinary EFL client of efl_debugd (eina_init
 * connects to $XDG_RUNTIME_DIR/.edebug/efl_debug/0). With the work-around (the default) it
 * registers "CPU/Freq/on" and "CPU/Freq/off" itself, as EFL 1.26.3 applications must: upstream
 * registers them in _eina_debug_cpu_init before the debug session exists, so they are never
 * registered and `efl_debug evlogon` gets empty captures (docs/efl.md).
 *
 * Protocol with the test, on stdout (one line each, flushed):
 *   "ready PID"        after eina/ecore are up and the work-around is registered;
 *   "done PID"         after one workload run (started by SIGUSR1, or at once with --auto);
 *   "cpufreq on PID", "cpufreq off PID"  when the work-around's handlers start/stop the evlog;
 * SIGTERM/SIGINT end it cleanly; SIGKILL is the "killed mid-run" case.
 *
 * The workload (the counts the test derives its expectations from): N threads (default 3),
 * each R times (default 400):
 *   +tlc_outer  { +tlc_inner -tlc_inner } x 2  >tlc_stateK <tlc_stateK  !tlc_tick  -tlc_outer
 * (K the thread's index: a state area of its own, so its entries do not depend on how the
 * threads interleave) so per run: tlc_outer N*R calls (R per thread), tlc_inner 2*N*R,
 * tlc_stateK R entries each, tlc_tick N*R writes. Each thread pauses 1 ms every 50 repetitions so a
 * run spans several polls.
 */
#define EFL_BETA_API_SUPPORT 1
#include <Ecore.h>
#include <Eina.h>

#include <fcntl.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int nthreads = 3, reps = 400;
static int cpufreq_active;
static int report_fd = 1; /* the test's line protocol; fd 1 itself goes to /dev/null, since
                             eina prints "send evlog size N" there for every EvLog/get */
static Ecore_Event_Handler *usr_handler, *exit_handler;

/* One line on stdout from any thread (the debug monitor thread runs the callbacks). */
static void say(const char *what) {
  char line[96];
  int n = snprintf(line, sizeof(line), "%s %ld\n", what, (long)getpid());
  if (n > 0 && write(report_fd, line, (size_t)n) < 0)
    return;
}

/* The work-around: what eina's own CPU/Freq/on handler would do for the evlog. */
static Eina_Bool cpufreq_on_cb(Eina_Debug_Session *s, int cid, void *buf, int size) {
  (void)s;
  (void)cid;
  (void)buf;
  (void)size;
  if (!__atomic_exchange_n(&cpufreq_active, 1, __ATOMIC_SEQ_CST)) {
    eina_evlog_start();
    say("cpufreq on");
  }
  return EINA_TRUE;
}

static Eina_Bool cpufreq_off_cb(Eina_Debug_Session *s, int cid, void *buf, int size) {
  (void)s;
  (void)cid;
  (void)buf;
  (void)size;
  if (__atomic_exchange_n(&cpufreq_active, 0, __ATOMIC_SEQ_CST)) {
    eina_evlog_stop();
    say("cpufreq off");
  }
  return EINA_TRUE;
}

EINA_DEBUG_OPCODES_ARRAY_DEFINE(workaround_ops, { "CPU/Freq/on", NULL, &cpufreq_on_cb },
                                { "CPU/Freq/off", NULL, &cpufreq_off_cb }, { NULL, NULL, NULL });

static void *worker(void *arg) {
  char st_on[32], st_off[32];
  snprintf(st_on, sizeof(st_on), ">tlc_state%d", (int)(intptr_t)arg);
  snprintf(st_off, sizeof(st_off), "<tlc_state%d", (int)(intptr_t)arg);
  for (int r = 0; r < reps; r++) {
    eina_evlog("+tlc_outer", NULL, 0.0, NULL);
    for (int k = 0; k < 2; k++) {
      eina_evlog("+tlc_inner", NULL, 0.0, NULL);
      eina_evlog("-tlc_inner", NULL, 0.0, NULL);
    }
    eina_evlog(st_on, NULL, 0.0, NULL);
    eina_evlog(st_off, NULL, 0.0, NULL);
    eina_evlog("!tlc_tick", NULL, 0.0, "1");
    eina_evlog("-tlc_outer", NULL, 0.0, NULL);
    if (r % 50 == 49) {
      struct timespec ts = { 0, 1000000 };
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void run_workload(void) {
  pthread_t th[64];
  int n = nthreads > 64 ? 64 : nthreads;
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  say("done");
}

static Eina_Bool usr_cb(void *data, int type, void *event) {
  (void)data;
  (void)type;
  (void)event;
  run_workload();
  return ECORE_CALLBACK_PASS_ON;
}

static Eina_Bool exit_cb(void *data, int type, void *event) {
  (void)data;
  (void)type;
  (void)event;
  ecore_main_loop_quit();
  return ECORE_CALLBACK_DONE;
}

static Eina_Bool auto_cb(void *data) {
  (void)data;
  run_workload();
  return ECORE_CALLBACK_CANCEL;
}

int main(int argc, char **argv) {
  int workaround = 1, autorun = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--no-workaround") == 0)
      workaround = 0;
    else if (strcmp(argv[i], "--auto") == 0)
      autorun = 1;
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      nthreads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: efl_app [--no-workaround] [--threads N] [--reps R] [--auto]\n");
      return 2;
    }
  }
  {
    int nul = open("/dev/null", O_WRONLY);
    report_fd = dup(1);
    if (nul < 0 || report_fd < 0 || dup2(nul, 1) < 0) {
      fprintf(stderr, "efl_app: cannot set up stdout\n");
      return 1;
    }
    close(nul);
  }
  if (!eina_init() || !ecore_init()) {
    fprintf(stderr, "efl_app: eina/ecore init failed\n");
    return 1;
  }
  if (workaround)
    eina_debug_opcodes_register(NULL, workaround_ops(), NULL, NULL);
  usr_handler = ecore_event_handler_add(ECORE_EVENT_SIGNAL_USER, usr_cb, NULL);
  exit_handler = ecore_event_handler_add(ECORE_EVENT_SIGNAL_EXIT, exit_cb, NULL);
  say("ready");
  if (autorun)
    ecore_timer_add(0.0, auto_cb, NULL);
  ecore_main_loop_begin();
  ecore_event_handler_del(usr_handler);
  ecore_event_handler_del(exit_handler);
  ecore_shutdown();
  eina_shutdown();
  return 0;
}
