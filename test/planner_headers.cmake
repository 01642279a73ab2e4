# ctest script: no planner header may pull in Eigen, Boost or the JSON layer (nlohmann-json, sluice/io/).
# Lists each header's dependencies with the compiler's -M and fails on any such path. Eigen's directory is on
# the include path, so that a header that did include it is named by the check rather than failing to parse.
# Inputs: CXX, SOURCE_DIR, EXTRA_FLAGS (a ;-list: include directories of Eigen and, with CBC, of CBC).
file(GLOB planner_headers RELATIVE ${SOURCE_DIR}/include
  ${SOURCE_DIR}/include/sluice/planners.hpp ${SOURCE_DIR}/include/sluice/strategies.hpp
  ${SOURCE_DIR}/include/sluice/comparison.hpp
  ${SOURCE_DIR}/include/sluice/core/*.hpp ${SOURCE_DIR}/include/sluice/cost/*.hpp
  ${SOURCE_DIR}/include/sluice/data/*.hpp ${SOURCE_DIR}/include/sluice/solver/*.hpp
  ${SOURCE_DIR}/include/sluice/assign/*.hpp ${SOURCE_DIR}/include/sluice/microbatch/*.hpp
  ${SOURCE_DIR}/include/sluice/schedule/*.hpp ${SOURCE_DIR}/include/sluice/plan/*.hpp
  ${SOURCE_DIR}/include/sluice/proposal/*.hpp
  ${SOURCE_DIR}/include/sluice/search/*.hpp ${SOURCE_DIR}/include/sluice/shard/*.hpp
  ${SOURCE_DIR}/include/sluice/compare/*.hpp)
# The headers of sluice::fit, which need Eigen by design.
list(REMOVE_ITEM planner_headers sluice/cost/fit.hpp sluice/cost/context_parallel.hpp
  sluice/search/analytic_profile.hpp sluice/search/galvatron.hpp)
if(NOT EXTRA_FLAGS MATCHES "SLUICE_HAVE_CBC")
  list(FILTER planner_headers EXCLUDE REGEX "cbc\\.hpp$")
endif()
list(LENGTH planner_headers count)
if(count LESS 40)
  message(FATAL_ERROR "found only ${count} planner headers under ${SOURCE_DIR}/include")
endif()

set(failures "")
foreach(header IN LISTS planner_headers)
  execute_process(
    COMMAND ${CXX} -std=c++20 -x c++ -M -I${SOURCE_DIR}/include ${EXTRA_FLAGS} ${SOURCE_DIR}/include/${header}
    RESULT_VARIABLE result OUTPUT_VARIABLE dependencies ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    string(APPEND failures "${header}: does not preprocess:\n${errors}\n")
  elseif(dependencies MATCHES "[^ \n]*(/Eigen/|/eigen3/|/boost/|/nlohmann/|sluice/io/)[^ \n]*")
    string(APPEND failures "${header}: includes ${CMAKE_MATCH_0}\n")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "planner headers with a third-party or JSON dependency:\n${failures}")
endif()
message(STATUS "${count} planner headers, none includes Eigen, Boost or the JSON layer")
