# Runs the executor's programs with bad input and checks the contract: exit code 2 and exactly one line on
# stderr, holding `fragment`. Arguments are checked before the programs look for a GPU: this runs anywhere.
function(expect_bad_input fragment tool)
  execute_process(COMMAND ${tool} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  string(FIND "${err}" "${fragment}" at)
  if(NOT code EQUAL 2 OR NOT lines EQUAL 1 OR NOT out STREQUAL "" OR at EQUAL -1)
    message(FATAL_ERROR "${tool} ${ARGN}: exit code ${code}, expected 2 with one line on stderr holding "
                        "'${fragment}', got\n${err}${out}")
  endif()
endfunction()

foreach(tool ${RUN_PLAN} ${PROFILE_GPU} ${MEASURE_SYSTEMS} ${TRAIN})
  expect_bad_input("no-such-option" ${tool} --no-such-option 1)
  expect_bad_input("layers" ${tool} --layers 0)
  expect_bad_input("many" ${tool} --hidden many)
endforeach()
expect_bad_input("give one of" ${RUN_PLAN})
expect_bad_input("give one of" ${RUN_PLAN} --profile-from-gpu --profile llama2-7b.json)
expect_bad_input("--backend must be cuda or host" ${MEASURE_SYSTEMS} --backend tpu)
expect_bad_input("needs --profile" ${MEASURE_SYSTEMS} --backend host)
expect_bad_input("--iterations must be in" ${MEASURE_SYSTEMS} --iterations 0)
expect_bad_input("--tokens must be" ${MEASURE_SYSTEMS} --tokens -5)
expect_bad_input("no-such-lengths" ${MEASURE_SYSTEMS} --lengths no-such-lengths)
# sluice_profile_gpu's schemes: named, runnable by the model, given tokens on every lane.
expect_bad_input("cannot parse 'tp2xx'" ${PROFILE_GPU} --schemes tp1pp1,tp2xx)
expect_bad_input("TP 3 does not divide" ${PROFILE_GPU} --schemes tp3pp1)
expect_bad_input("leaves lanes of tp2cp4ringpp1 without tokens" ${PROFILE_GPU} --schemes tp2cp4ringpp1
                 --lengths 8,16,32)

# sluice_train: its options, and checkpoints that do not fit.
expect_bad_input("give --profile" ${TRAIN})
expect_bad_input("--iterations must be in" ${TRAIN} --profile ${PROFILE_TP} --iterations 0)
expect_bad_input("--learning-rate: 'fast' is not a number" ${TRAIN} --profile ${PROFILE_TP} --learning-rate fast)
expect_bad_input("no-such-checkpoint.json: cannot open file" ${TRAIN} --profile ${PROFILE_TP}
                 --resume no-such-checkpoint.json)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/not_a_checkpoint.json "{\"format\": \"sluice.profile\", \"version\": 1}")
expect_bad_input("expected format 'sluice.training_checkpoint'" ${TRAIN} --profile ${PROFILE_TP}
                 --resume ${CMAKE_CURRENT_BINARY_DIR}/not_a_checkpoint.json)

# --help: the usage on stdout, exit code 0, before any option is checked.
foreach(tool ${RUN_PLAN} ${PROFILE_GPU} ${MEASURE_SYSTEMS} ${TRAIN})
  execute_process(COMMAND ${tool} --help --layers 0 RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0 OR NOT err STREQUAL "" OR NOT out MATCHES "^usage: ")
    message(FATAL_ERROR "${tool} --help: exit code ${code}, expected 0 with the usage on stdout, got\n${err}${out}")
  endif()
  # --version: the project's version, exit code 0, before any option is checked.
  execute_process(COMMAND ${tool} --version --layers 0 RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0 OR NOT err STREQUAL "" OR NOT out STREQUAL "sluice ${VERSION}\n")
    message(FATAL_ERROR "${tool} --version: exit code ${code}, expected 0 and 'sluice ${VERSION}', got\n${err}${out}")
  endif()
endforeach()

# The host backend and the run of one process per rank: their options are checked before anything runs.
expect_bad_input("--backend must be cuda or host" ${RUN_PLAN} --backend tpu --profile llama2-7b)
expect_bad_input("needs --profile" ${RUN_PLAN} --backend host --profile-from-gpu)
expect_bad_input("--serialize is for the CUDA backend" ${RUN_PLAN} --backend host --profile llama2-7b --serialize)
expect_bad_input("--timeout must be in [1, 86400]" ${RUN_PLAN} --backend host --profile llama2-7b --timeout 0)
# A plan whose TP or Ulysses degree the model cannot run: refused by name with exit code 2, before anything runs.
set(tp_model --layers 4 --hidden 48 --heads 3 --ffn 64 --vocab 64 --tokens 2048 --context 256 --gpus 4 --backend host)
expect_bad_input("TP 2 does not divide the model's 3 heads" ${RUN_PLAN} ${tp_model} --profile ${PROFILE_TP})
expect_bad_input("--cp-kinds needs --cp" ${RUN_PLAN} ${tp_model} --profile ${PROFILE_TP} --cp-kinds ring)
expect_bad_input("option --cp: expected degrees" ${MEASURE_SYSTEMS} --backend host --profile ${PROFILE_TP} --cp 1)
# --tp: the TP degrees of the profile measured on the spot, checked against the model and the GPUs before any device
# is looked for; a profile file has its own schemes.
expect_bad_input("TP 3 does not divide the model's 32 heads" ${MEASURE_SYSTEMS} --tp 1,3)
expect_bad_input("--tp 8 is not a TP degree of 4 GPUs" ${MEASURE_SYSTEMS} --tp 8)
expect_bad_input("--tp names 2 twice" ${RUN_PLAN} --profile-from-gpu --tp 2,2)
expect_bad_input("a --profile file has its own" ${RUN_PLAN} --profile llama2-7b --tp 2)
expect_bad_input("a --profile file has its own" ${MEASURE_SYSTEMS} --backend host --profile ${PROFILE_TP} --tp 1,2)
# Environment variables that say the program is one of several processes, as torchrun sets them: the executor's
# processes talk over MPI, so this is refused with one line rather than run as a lone process.
foreach(tool ${RUN_PLAN} ${MEASURE_SYSTEMS})
  expect_bad_input("start them with mpirun or srun" ${CMAKE_COMMAND} -E env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 ${tool})
endforeach()
