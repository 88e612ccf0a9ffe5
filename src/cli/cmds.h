/*
 * cmds.h — the innet command's subcommands. Each lives in its own
 * src/cli/cmd_<name>.c and returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage error (message on stderr).
 */
#ifndef INNET_TOOLS_CMDS_H
#define INNET_TOOLS_CMDS_H

int cmd_switch(int argc, char **argv);
int cmd_fabric(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_programs(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_counter(int argc, char **argv);
int cmd_kv(int argc, char **argv);
int cmd_paxos(int argc, char **argv);
int cmd_dnn(int argc, char **argv);
int cmd_allreduce(int argc, char **argv);
int cmd_lb(int argc, char **argv);
int cmd_p4(int argc, char **argv);

#endif
