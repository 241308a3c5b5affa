/* fleet_cli.h - `tlcap fleet` (client/fleet.c): argc/argv from the command word on; returns the
 * exit status. Runs on the CLI's main thread. */
#ifndef TLC_FLEET_CLI_H
#define TLC_FLEET_CLI_H

int tlc_cli_fleet(int argc, char **argv);

/* Prints s to stdout as a JSON string through formats/json.c (client/tlcap.c). */
void tlc_cli_json_str(const char *s);

#endif
