# sluice_measure_systems end to end on the host backend (no GPU): it exits 0, prints the table, and its
# sluice.measured_systems document holds the three systems, each with an iteration per batch whose loss is the same
# for every system (plans only reorder float64 sums).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(json ${WORK_DIR}/measured.json)
execute_process(
  COMMAND ${MEASURE_SYSTEMS} --backend host --profile ${PROFILE} --layers 4 --hidden 32 --heads 2 --ffn 64 --vocab 64
          --context 256 --tokens 2048 --gpus 4 --iterations 2 --json ${json}
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0 OR NOT err STREQUAL "" OR NOT out MATCHES "system +predicted ms +measured ms")
  message(FATAL_ERROR "sluice_measure_systems --backend host: exit code ${code}\n${err}${out}")
endif()
file(READ ${json} document)
string(JSON format GET "${document}" format)
string(JSON systems LENGTH "${document}" systems)
if(NOT format STREQUAL "sluice.measured_systems" OR NOT systems EQUAL 3)
  message(FATAL_ERROR "unexpected document: format '${format}', ${systems} systems")
endif()
set(expected_names megatron dynapipe sluice)
foreach(s RANGE 2)
  list(GET expected_names ${s} expected)
  string(JSON name GET "${document}" systems ${s} name)
  string(JSON iterations LENGTH "${document}" systems ${s} iterations)
  string(JSON error GET "${document}" systems ${s} prediction_error)
  if(NOT name STREQUAL expected OR NOT iterations EQUAL 2 OR NOT error MATCHES "^-?[0-9]")
    message(FATAL_ERROR "system ${s}: name '${name}', ${iterations} iterations, prediction error '${error}'")
  endif()
  foreach(k 0 1)
    string(JSON loss GET "${document}" systems ${s} iterations ${k} loss)
    string(SUBSTRING "${loss}" 0 10 loss)  # ten digits: float64 sums in another order differ far below them
    if(s EQUAL 0)
      set(loss_${k} ${loss})
    elseif(NOT loss STREQUAL loss_${k})
      message(FATAL_ERROR "iteration ${k}: ${name}'s loss ${loss} differs from megatron's ${loss_${k}}")
    endif()
  endforeach()
endforeach()
