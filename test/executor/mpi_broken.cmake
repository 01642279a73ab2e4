# A broken plan run with one MPI process per rank (test_executor_mpi --broken KIND): every process must end, with
# a non-zero exit code, within the test's timeout, and the rank that met the break must say so in one line naming
# itself and the instruction; a process that dies (peer_exits) makes the launcher end the others. Inputs: MPIEXEC
# (the launcher and its arguments, a ;-list), PROGRAM, KIND.
execute_process(
  COMMAND ${MPIEXEC} ${PROGRAM} --broken ${KIND}
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(KIND STREQUAL "peer_exits")
  # An exit code, not "Process terminated due to timeout", and no process ran the plan to its end.
  if(NOT code MATCHES "^[1-9][0-9]*$" OR err MATCHES "ran to its end")
    message(FATAL_ERROR "--broken peer_exits: exit code '${code}', expected the launcher to end every process; "
                        "stderr:\n${err}\nstdout:\n${out}")
  endif()
  return()
endif()
set(expected_missing_receive "rank 1: executor: rank 1 instruction [0-9]+ \\(forward micro-batch 0\\)")
set(expected_mismatched_size "rank 1: executor: rank 1 instruction [0-9]+ \\(recv_act_wait micro-batch 0\\): mismatch")
set(expected_cycle "rank 0: executor: rank 0 instruction [0-9]+ \\(recv_grad_wait micro-batch 0\\): timed out")
set(expected_push_fails "rank 1: injected failure in the middle of the push")
if(code EQUAL 0 OR NOT err MATCHES "test_executor_mpi: ${expected_${KIND}}")
  message(FATAL_ERROR "--broken ${KIND}: exit code '${code}', expected an error matching "
                      "'${expected_${KIND}}'; stderr:\n${err}\nstdout:\n${out}")
endif()
string(REGEX MATCHALL "test_executor_mpi: rank [0-9]+:[^\n]*" lines "${err}")
list(LENGTH lines count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "--broken ${KIND}: ${count} error lines from the processes, expected one:\n${err}")
endif()
message(STATUS "--broken ${KIND}: ${lines}")
