/*
 * cmd.h — the subcommands. Each src/cmd/NAME.c has its usage text at the top
 * and exports cmd_NAME(argc, argv), with argv[0] the subcommand's name.
 * Each returns the process exit status.
 */
#ifndef LP_CMD_H
#define LP_CMD_H

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_sweep(int argc, char **argv);

#endif
