/* replay.h - `tlcapd replay`: offline decoding, statistics and export of capture files. */
#ifndef TLC_REPLAY_H
#define TLC_REPLAY_H

/* Runs `tlcapd replay FILE... [options]` with argv[0] == "replay". Returns the process exit
 * status: 0 success, 1 bad input (a message on stderr names the file, byte offset and reason),
 * 2 usage. Runs on the calling thread; no event loop. */
int tlc_replay_main(int argc, char **argv);

#endif
