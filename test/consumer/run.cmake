# ctest driver: builds and runs test/consumer against this sluice, by add_subdirectory or by
# find_package after installing the build tree into a scratch prefix.
# MODE: add_subdirectory, find_package or find_package_cbc (only the cbc component).
# Inputs: MODE, SOURCE_DIR, BUILD_DIR (sluice's build tree), WORK_DIR, GENERATOR.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "command failed (${result}): ${ARGN}\n${output}")
  endif()
  set(last_output "${output}" PARENT_SCOPE)
endfunction()

# An installed consumer must read the installed data, not the source tree it was built from.
function(expect_installed_data)
  string(FIND "${last_output}" "${WORK_DIR}/prefix/share/sluice/" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "expected data from ${WORK_DIR}/prefix/share/sluice, got:\n${last_output}")
  endif()
endfunction()

# No build type: no optimisation, the quickest build of what is only checked to compile, link and run.
set(configure_args -S ${SOURCE_DIR}/test/consumer -B ${WORK_DIR}/build -G ${GENERATOR})
if(MODE MATCHES "^find_package")
  run_checked(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  # Every installed file lies under the prefix (the Python package's absolute site-packages destination is only for
  # `--component python`).
  file(STRINGS ${BUILD_DIR}/install_manifest.txt installed_files)
  foreach(installed IN LISTS installed_files)
    string(FIND "${installed}" "${WORK_DIR}/prefix/" inside)
    if(NOT inside EQUAL 0)
      message(FATAL_ERROR "cmake --install --prefix ${WORK_DIR}/prefix wrote ${installed}")
    endif()
  endforeach()
  # Nothing from the source tree may leak into the installed package.
  file(GLOB_RECURSE installed_configs ${WORK_DIR}/prefix/*.cmake)
  foreach(config IN LISTS installed_configs)
    file(READ ${config} text)
    string(FIND "${text}" "${SOURCE_DIR}" leak)
    if(NOT leak EQUAL -1)
      message(FATAL_ERROR "${config} refers to the source tree")
    endif()
  endforeach()
  list(APPEND configure_args -DSLUICE_CONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  list(APPEND configure_args -DSLUICE_CONSUMER_MODE=add_subdirectory -DSLUICE_SOURCE_DIR=${SOURCE_DIR})
endif()

# find_package_cbc: a consumer that asks for the cbc component links sluice::cbc and solves with CBC.
if(MODE STREQUAL "find_package_cbc")
  run_checked(${CMAKE_COMMAND} ${configure_args} -DSLUICE_CONSUMER_CBC=ON)
  run_checked(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  run_checked(${WORK_DIR}/build/cbc_consumer)
  return()
endif()
# Otherwise pkg-config finds no CBC, as on a machine without it: only a consumer asking for cbc needs it.
file(MAKE_DIRECTORY ${WORK_DIR}/no-pkgconfig)
run_checked(${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${WORK_DIR}/no-pkgconfig PKG_CONFIG_LIBDIR=${WORK_DIR}/no-pkgconfig
            ${CMAKE_COMMAND} ${configure_args})
run_checked(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_checked(${WORK_DIR}/build/planner_consumer)
run_checked(${WORK_DIR}/build/consumer)
if(MODE STREQUAL "find_package")
  expect_installed_data()
  # The installed tool finds its bundled data from its own location.
  run_checked(${WORK_DIR}/prefix/bin/sluice inspect --json)
  expect_installed_data()
endif()
