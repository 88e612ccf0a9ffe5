"""p4t — innet's P4 test tools: p4c's STF language, BMv2 and innet as
executors of one run-script language, the corpus runner and the
differential tester (tools/p4/p4test is the command)."""
