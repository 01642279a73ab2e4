# sluice_run_plan and sluice_measure_systems started by mpirun as one process per rank (the host backend, ranks
# talking over MPI) against the same programs started alone: the same plans, the same losses to the last bit
# (float64 sums in the one-process order), one report from rank 0, and no output from the other processes.
# The same with TP 2, CP of both kinds and recompute (PROFILE_TP and --cp, --cp-kinds, --ac): plans whose stages run on
# several ranks exchanging data inside their passes; and sluice_train, whose steps pull and push the parameters.
# Inputs: MPIEXEC (the launcher and its arguments up to the process count, a ;-list), RUN_PLAN, MEASURE_SYSTEMS,
# TRAIN, PROFILE, PROFILE_TP, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(model --layers 4 --hidden 32 --heads 2 --ffn 64 --vocab 64 --profile ${PROFILE})

# Runs ARGN alone and under mpirun -n 4, each writing `output_option` WORK_DIR/STEM_alone.json or _mpi.json; sets
# alone_out and mpi_out (stdout) in the caller.
function(run_both name output_option stem)
  execute_process(COMMAND ${ARGN} ${output_option} ${WORK_DIR}/${stem}_alone.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE alone ERROR_VARIABLE err)
  if(NOT code EQUAL 0 OR NOT err STREQUAL "")
    message(FATAL_ERROR "${name} alone: exit code ${code}\n${err}${alone}")
  endif()
  execute_process(COMMAND ${MPIEXEC} 4 ${ARGN} ${output_option} ${WORK_DIR}/${stem}_mpi.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE mpi ERROR_VARIABLE err TIMEOUT 200)
  if(NOT code EQUAL 0 OR NOT err STREQUAL "")
    message(FATAL_ERROR "${name} under mpirun -n 4: exit code ${code}\n${err}${mpi}")
  endif()
  set(alone_out "${alone}" PARENT_SCOPE)
  set(mpi_out "${mpi}" PARENT_SCOPE)
endfunction()

function(expect_same_line name pattern)
  string(REGEX MATCH "${pattern}" alone_line "${alone_out}")
  string(REGEX MATCHALL "${pattern}" mpi_lines "${mpi_out}")
  if(alone_line STREQUAL "" OR NOT mpi_lines STREQUAL alone_line)
    message(FATAL_ERROR "${name}: '${pattern}' alone is '${alone_line}', under mpirun '${mpi_lines}'\n"
                        "alone:\n${alone_out}\nunder mpirun:\n${mpi_out}")
  endif()
endfunction()

# DynaPipe's plan (2 stages, 2 replicas) and the sluice plan, each of 4 ranks.
foreach(planner dynapipe sluice)
  set(options --tokens 2048 --context 256 --gpus 4 --backend host)
  if(planner STREQUAL "dynapipe")
    list(APPEND options --dynapipe --pp 2 --replicas 2)
  endif()
  run_both("sluice_run_plan (${planner})" --trace ${planner} ${RUN_PLAN} ${model} ${options})
  expect_same_line("sluice_run_plan (${planner})" "loss [^\n]*")
  if(planner STREQUAL "sluice")
    expect_same_line("sluice_run_plan (${planner})" "strategy [^\n]*")
  endif()
  if(NOT mpi_out MATCHES "on host \\(float64\\), 4 MPI processes" OR NOT EXISTS ${WORK_DIR}/${planner}_mpi.json)
    message(FATAL_ERROR "sluice_run_plan (${planner}) under mpirun: no report or trace from rank 0\n${mpi_out}")
  endif()
endforeach()

# The sluice plan on TP 2 with Ulysses CP and recompute in its space: a TP 2 strategy.
set(tp_model --layers 4 --hidden 32 --heads 2 --ffn 64 --vocab 64 --profile ${PROFILE_TP} --cp 2 --cp-kinds ulysses --ac)
run_both("sluice_run_plan (TP)" --trace tp ${RUN_PLAN} ${tp_model} --tokens 2048 --context 256 --gpus 4 --backend host)
expect_same_line("sluice_run_plan (TP)" "loss [^\n]*")
expect_same_line("sluice_run_plan (TP)" "strategy [^\n]*tp2[^\n]*")

# The three systems' plans for two batches: every iteration's loss, in full precision, the same as alone; with TP and
# CP too, where the systems pick TP 2, ring CP and (sluice) flex CP groups.
foreach(space plain tp)
  set(options --context 256 --tokens 2048 --gpus 4 --iterations 2 --backend host)
  if(space STREQUAL "tp")
    set(options ${options} --profile ${PROFILE_TP} --cp 2 --cp-kinds ulysses,ring --ac)
  endif()
  run_both(sluice_measure_systems --json measured_${space} ${MEASURE_SYSTEMS} ${model} ${options})
  file(READ ${WORK_DIR}/measured_${space}_alone.json alone_document)
  file(READ ${WORK_DIR}/measured_${space}_mpi.json mpi_document)
  set(strategies "")
  foreach(s RANGE 2)
    foreach(k 0 1)
      string(JSON alone_loss GET "${alone_document}" systems ${s} iterations ${k} loss)
      string(JSON mpi_loss GET "${mpi_document}" systems ${s} iterations ${k} loss)
      string(JSON strategy GET "${mpi_document}" systems ${s} iterations ${k} strategy)
      string(APPEND strategies " ${strategy}")
      if(NOT alone_loss STREQUAL mpi_loss)
        message(FATAL_ERROR "sluice_measure_systems (${space}) system ${s} iteration ${k}: loss ${mpi_loss} under "
                            "mpirun, ${alone_loss} alone")
      endif()
    endforeach()
  endforeach()
  if(space STREQUAL "tp" AND NOT strategies MATCHES "tp2" OR space STREQUAL "tp" AND NOT strategies MATCHES "cp2")
    message(FATAL_ERROR "sluice_measure_systems (TP, CP): the systems ran${strategies}, none of TP 2 or CP 2")
  endif()
endforeach()

# Training (sluice_train): four steps alone and under mpirun -n 4, the same loss every step; three steps, a
# checkpoint, and one step resumed from it: the fourth step's loss again.
set(training ${TRAIN} --profile ${PROFILE_TP} --cp 2 --cp-kinds ulysses,ring --ac --gpus 4)
run_both(sluice_train --json train ${training} --iterations 4)
execute_process(COMMAND ${training} --iterations 3 --checkpoint ${WORK_DIR}/checkpoint.json
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
execute_process(COMMAND ${training} --iterations 1 --resume ${WORK_DIR}/checkpoint.json
                        --json ${WORK_DIR}/resumed.json
                RESULT_VARIABLE resumed_code OUTPUT_VARIABLE resumed_out ERROR_VARIABLE resumed_err)
if(NOT code EQUAL 0 OR NOT resumed_code EQUAL 0)
  message(FATAL_ERROR "sluice_train with a checkpoint: exit codes ${code} and ${resumed_code}\n${err}${resumed_err}")
endif()
file(READ ${WORK_DIR}/train_alone.json alone_document)
file(READ ${WORK_DIR}/train_mpi.json mpi_document)
file(READ ${WORK_DIR}/resumed.json resumed_document)
foreach(k RANGE 3)
  string(JSON alone_loss GET "${alone_document}" iterations ${k} loss)
  string(JSON mpi_loss GET "${mpi_document}" iterations ${k} loss)
  if(NOT alone_loss STREQUAL mpi_loss)
    message(FATAL_ERROR "sluice_train step ${k}: loss ${mpi_loss} under mpirun, ${alone_loss} alone")
  endif()
endforeach()
string(JSON resumed_step GET "${resumed_document}" iterations 0 step)
string(JSON resumed_loss GET "${resumed_document}" iterations 0 loss)
if(NOT resumed_step EQUAL 3 OR NOT resumed_loss STREQUAL alone_loss)
  message(FATAL_ERROR "sluice_train resumed from its checkpoint: step ${resumed_step} loss ${resumed_loss}, the "
                      "run without a stop has step 3 loss ${alone_loss}")
endif()

# Too few processes for the plan's ranks, and an option every rank rejects: the run ends with the MPI_Abort code
# and a line naming a rank (the launcher may kill the other ranks before they print theirs).
set(options ${model} --tokens 2048 --context 256 --gpus 4 --backend host --trace ${WORK_DIR}/refused.json)
foreach(case "few;--timeout;60;the job has 4 ranks, the communicator 2 processes"
             "option;--timeout;0;--timeout must be in \\[1, 86400\\] seconds, got 0")
  list(GET case 0 name)
  list(SUBLIST case 1 2 extra)
  list(GET case 3 expected)
  execute_process(COMMAND ${MPIEXEC} 2 ${RUN_PLAN} ${options} ${extra}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT code EQUAL 2 OR NOT err MATCHES "sluice_run_plan: rank [01]: [^\n]*${expected}"
     OR EXISTS ${WORK_DIR}/refused.json)
    message(FATAL_ERROR "sluice_run_plan under mpirun -n 2 (${name}): exit code ${code}, wanted 2, a line naming a "
                        "rank and no trace\n${err}${out}")
  endif()
endforeach()
