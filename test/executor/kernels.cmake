# Registers the executor kernel tests. include() this from test/executor/CMakeLists.txt, after
# reference_executor/kernels has been added; it uses sluice_add_test from test/CMakeLists.txt.
# Targets (and ctest names) it creates:
#   test_executor_reference  the float64 CPU references against hand-checked values and finite
#                            differences; no CUDA needed, so it is created in every build.
#   test_executor_kernels    every GPU kernel against the references, plus the wrappers' argument
#                            checks; created when sluice_executor_kernels exists. Its GPU cases pass with
#                            a message when no CUDA device is present (the argument checks still run).
sluice_add_test(test_executor_reference ${CMAKE_CURRENT_LIST_DIR}/test_executor_reference.cpp)
target_link_libraries(test_executor_reference PRIVATE sluice_executor_reference)
if(TARGET sluice_executor_kernels)
  sluice_add_test(test_executor_kernels ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels.cpp)
  target_link_libraries(test_executor_kernels PRIVATE sluice_executor_kernels sluice_executor_reference)
endif()
