# Registers the executor kernel tests. include() this from test/executor/CMakeLists.txt, after
# reference_executor/kernels has been added; it uses sluice_add_test from test/CMakeLists.txt.
# Targets (and ctest names) it creates:
#   test_executor_reference  the float64 CPU references against hand-checked values and finite
#                            differences; no CUDA needed, so it is created in every build.
#   test_executor_kernels    the wrappers' argument checks, and (test_executor_kernels_gpu) every GPU
#                            kernel against the references; created when sluice_executor_kernels exists.
#                            Without a CUDA device the GPU test is reported as skipped.
sluice_add_test(test_executor_reference ${CMAKE_CURRENT_LIST_DIR}/test_executor_reference.cpp)
target_link_libraries(test_executor_reference PRIVATE sluice_executor_reference)

# A GPU test program: NAME's test cases that need no GPU as the ctest test NAME, its doctest suites "gpu" and
# "gpus:4" as NAME_gpu, which ctest reports as skipped where the devices are missing (gpu_test_main.cpp).
function(sluice_add_gpu_test name)
  add_executable(${name} ${ARGN} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gpu_test_main.cpp)
  target_link_libraries(${name} PRIVATE sluice::io doctest::doctest)
  sluice_target_defaults(${name})
  target_compile_options(${name} PRIVATE -Wno-unused-result)  # CHECK_THROWS discards [[nodiscard]] results
  sluice_test_optimisation(${name})
  add_test(NAME ${name} COMMAND ${name} --test-suite-exclude=gpu,gpus:4)
  add_test(NAME ${name}_gpu COMMAND ${name} --test-suite=gpu,gpus:4)
  set_tests_properties(${name}_gpu PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

if(TARGET sluice_executor_kernels)
  sluice_add_gpu_test(test_executor_kernels ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels.cpp)
  target_link_libraries(test_executor_kernels PRIVATE sluice_executor_kernels sluice_executor_reference)
endif()
